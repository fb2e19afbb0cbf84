-- Bench setup only, run as the database superuser: a schedule cloned from a template database
-- carries the template's (stale) cursor; restart every active cursor at the next second boundary
-- of the database clock so that no backlog precedes a lateness measurement.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
UPDATE ql3.trigger_schedules AS s
SET next_due_at_ms = (obs.now_ms / 1000 + 1) * 1000
FROM obs
WHERE s.state = 'active'
