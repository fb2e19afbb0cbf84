-- Bench setup only, run as the database superuser: ScheduleAdmin cannot move a cursor into the
-- past. Every active schedule's cursor goes to the second boundary `backlog_ms` before the
-- database's now, so each `* * * * * *` schedule has backlog_ms / 1000 occurrences due at once.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
UPDATE ql3.trigger_schedules AS s
SET next_due_at_ms = (obs.now_ms / 1000) * 1000 - %(backlog_ms)s
FROM obs
WHERE s.state = 'active'
