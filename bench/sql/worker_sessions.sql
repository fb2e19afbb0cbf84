-- Bench (worker): the sessions the benchmark's worker processes hold (application names `bw-*`:
-- a QL3 worker's pooled connections, its alert connection and its listener `bw-*-listen`; a
-- bare loop's one connection), and how many of them are listeners.
SELECT count(*) AS sessions,
       count(*) FILTER (WHERE application_name LIKE 'bw-%-listen') AS listeners
FROM pg_stat_activity
WHERE application_name LIKE 'bw-%'
