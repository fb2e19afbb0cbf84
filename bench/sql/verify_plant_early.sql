-- Bench setup only (verify): one run (and its attempt and events, so the shape holds) committed
-- 400 ms before its occurrence: `early`.
WITH moved AS (
    UPDATE ql3.runs
    SET created_at_ms = scheduled_for_ms - 400
    WHERE schedule_id = %(schedule_id)s AND scheduled_for_ms = %(at_ms)s
    RETURNING id, created_at_ms
),
moved_attempts AS (
    UPDATE ql3.attempts AS a
    SET created_at_ms = m.created_at_ms, updated_at_ms = m.created_at_ms
    FROM moved AS m
    WHERE a.run_id = m.id
)
UPDATE ql3.events AS e
SET created_at_ms = m.created_at_ms
FROM moved AS m
WHERE e.run_id = m.id
