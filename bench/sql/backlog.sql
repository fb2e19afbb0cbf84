-- Schedules still at least one second behind the database time `at_ms`: the backlog left.
SELECT count(*) AS behind, min(next_due_at_ms) AS oldest_cursor_ms
FROM ql3.trigger_schedules
WHERE state = 'active' AND next_due_at_ms <= %(at_ms)s - 1000
