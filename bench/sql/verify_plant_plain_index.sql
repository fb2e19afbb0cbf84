-- Bench setup only (verify): the non-unique index in place of runs_occurrence_unique, on the same
-- columns (request_id included since migration 0008), so the violated history is read with the
-- plans of a live one: verify_occurrences.sql reads that index alone (an index-only scan). With
-- request_id left out, each schedule's occurrences were fetched from the table, row by row.
CREATE INDEX runs_occurrence_plain ON ql3.runs (schedule_id, scheduled_for_ms, request_id)
