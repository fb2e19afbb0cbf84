-- Bench (worker): the sessions the benchmark's worker processes hold (application names `bw-*`:
-- a QL3 worker's pooled connections and its listener, a bare loop's one connection).
SELECT count(*) AS sessions FROM pg_stat_activity WHERE application_name LIKE 'bw-%'
