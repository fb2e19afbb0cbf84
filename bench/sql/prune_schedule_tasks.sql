-- Bench setup only (prune): each schedule's task, to append rows for it hour after hour.
SELECT s.id AS schedule_id, s.task_id
FROM ql3.trigger_schedules AS s
WHERE s.id = ANY (%(ids)s::bigint[])
ORDER BY s.id
