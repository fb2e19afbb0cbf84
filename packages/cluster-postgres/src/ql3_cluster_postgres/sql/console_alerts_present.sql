-- ConsoleReader: does this database have an alerts table (schema 13) this login may read? The
-- console shows its alerts page only then (the observer holds column grants, hence "any column").
SELECT CASE
           WHEN to_regclass('ql3.alerts') IS NULL THEN false
           ELSE has_any_column_privilege('ql3.alerts', 'SELECT')
       END AS present
