-- ConsoleReader, one schedule's page: how many Runs the schedule has, all kinds, all time (pruned
-- Runs are gone). Counted from the (schedule_id, scheduled_for_ms) unique index alone (an
-- index-only scan: no Run row and no attempt is read while the visibility map is current), so
-- the admission path keeps its statements and gains no write.
SELECT count(*)::bigint AS runs
FROM ql3.runs AS r
WHERE r.schedule_id = %(schedule_id)s::bigint
