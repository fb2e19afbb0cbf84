-- ScheduleAdmin.trigger_run: ql3.admin_trigger_run_v1 (migration 0008) admits one manual Run of
-- the schedule for the request at the database time, or returns the Run already admitted for it.
SELECT t.run_id, t.attempt_id, t.schedule_id, t.task_id, t.schedule_name, t.request_id,
       t.scheduled_for_ms, t.created_at_ms, t.payload, t.requested_by, t.existed
FROM ql3.admin_trigger_run_v1(%(schedule)s::text, %(request_id)s::text, %(payload)s::jsonb) AS t
