-- ConsoleReader: does this database have an alerts table this login may read? The console
-- shows its alerts page only then.
SELECT CASE
           WHEN to_regclass('ql3.alerts') IS NULL THEN false
           ELSE has_table_privilege('ql3.alerts', 'SELECT')
       END AS present
