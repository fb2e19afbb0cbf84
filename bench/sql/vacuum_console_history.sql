-- bench.console: the seeded history vacuumed and analysed, as autovacuum leaves an insert-mostly
-- table (PostgreSQL 13+ vacuums after inserts): statistics current and the visibility map set, so
-- one schedule's all-time Run total is the index-only count it is in a running deployment.
VACUUM (ANALYZE) ql3.runs, ql3.attempts, ql3.trigger_schedules, ql3.skipped_occurrences
