-- verify_history: runs in scope that belong to no schedule, or whose task is not their
-- schedule's (one sequential scan; normally no row).
SELECT r.schedule_id, r.id, r.task_id, s.task_id AS schedule_task_id
FROM ql3.runs AS r
LEFT JOIN ql3.trigger_schedules AS s ON s.id = r.schedule_id
WHERE r.scheduled_for_ms >= %(since_ms)s
  AND (s.id IS NULL OR s.task_id <> r.task_id)
ORDER BY r.schedule_id, r.id
