-- Bench setup only (verify): what autovacuum does to a settled history (hint bits, visibility
-- map, statistics), done once so the first verify does not pay for it.
VACUUM (ANALYZE) ql3.runs, ql3.attempts, ql3.events, ql3.skipped_occurrences, ql3.schedule_revisions
