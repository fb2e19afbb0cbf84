-- Bench (prune): what autovacuum does after a prune, done at once so the space freed is reused
-- by the next hour's rows (plain VACUUM: no table rewrite, no exclusive lock).
VACUUM (ANALYZE) ql3.runs, ql3.attempts, ql3.events, ql3.skipped_occurrences, ql3.history_checkpoints
