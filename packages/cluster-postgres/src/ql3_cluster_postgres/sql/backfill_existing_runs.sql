-- ScheduleAdmin.backfill (plan): which of the given occurrences of the schedule already have a
-- Run (a cron Run or a backfilled one: request_id NULL, the runs_occurrence_unique key).
SELECT r.scheduled_for_ms
FROM ql3.runs AS r
WHERE r.schedule_id = %(schedule_id)s::bigint
  AND r.request_id IS NULL
  AND r.scheduled_for_ms = ANY (%(instants)s::bigint[])
