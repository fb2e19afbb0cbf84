-- Bench (worker): the sessions of the worker processes whose ids start with `prefix` (application
-- names `bw-<id>`: a QL3 worker's pooled connections and alert connection, and its listener
-- `bw-<id>-listen`; a bare loop's one connection), and how many of them are listeners. Sessions of
-- processes started earlier (still leaving) have other prefixes and are not counted.
SELECT count(*) AS sessions,
       count(*) FILTER (WHERE application_name LIKE '%%-listen') AS listeners
FROM pg_stat_activity
WHERE starts_with(application_name, 'bw-' || %(prefix)s::text)
