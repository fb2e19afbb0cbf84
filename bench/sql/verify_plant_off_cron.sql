-- Bench setup only (verify): move one run 500 ms before its occurrence (still
-- committed after it): `not_occurrence` for the
-- run, and `missing` for the occurrence it left.
UPDATE ql3.runs
SET scheduled_for_ms = scheduled_for_ms - 500
WHERE schedule_id = %(schedule_id)s AND scheduled_for_ms = %(at_ms)s
