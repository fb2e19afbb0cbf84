-- Bench setup only (verify): lose one admission (its run, attempt and events): `missing`.
WITH gone AS (
    DELETE FROM ql3.runs
    WHERE schedule_id = %(schedule_id)s AND scheduled_for_ms = %(at_ms)s
    RETURNING id
),
gone_attempts AS (
    DELETE FROM ql3.attempts WHERE run_id IN (SELECT id FROM gone)
)
DELETE FROM ql3.events WHERE run_id IN (SELECT id FROM gone)
