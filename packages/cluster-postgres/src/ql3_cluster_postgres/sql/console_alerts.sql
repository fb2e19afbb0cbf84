-- ConsoleReader, alerts page: the latest alerts, each row as JSON (the page shows the columns
-- the alerts table has, whatever its version).
SELECT to_jsonb(x) AS alert
FROM (SELECT * FROM ql3.alerts ORDER BY id DESC LIMIT %(batch_limit)s) AS x
