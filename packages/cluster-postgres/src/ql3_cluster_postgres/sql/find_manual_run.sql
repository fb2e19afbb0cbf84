-- ScheduleAdmin.trigger_run, settling a trigger whose COMMIT reply was lost: the manual Run of
-- the request, if it landed (runs_request_unique: at most one), with its first attempt.
SELECT r.id AS run_id, a.id AS attempt_id, r.schedule_id, r.task_id, k.name AS schedule_name,
       r.request_id, r.scheduled_for_ms, r.created_at_ms, r.payload,
       r.owner_id AS requested_by, true AS existed
FROM ql3.runs AS r
JOIN ql3.tasks AS k ON k.id = r.task_id
LEFT JOIN ql3.attempts AS a ON a.run_id = r.id AND a.attempt_number = 1
WHERE r.request_id = %(request_id)s::text
