-- Bench (prune, hourly with autovacuum): how many times autovacuum has vacuumed the least-vacuumed
-- history table; the run waits for it to grow after each prune instead of running VACUUM itself.
SELECT coalesce(min(autovacuum_count), 0) AS vacuums
FROM pg_stat_user_tables
WHERE schemaname = 'ql3' AND relname IN ('runs', 'attempts', 'events')
