-- Bench setup only (verify): the non-unique index in place of runs_occurrence_unique.
CREATE INDEX runs_occurrence_plain ON ql3.runs (schedule_id, scheduled_for_ms)
