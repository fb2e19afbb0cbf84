-- verify_history: the runs in scope (occurrences at or after since_ms), per schedule in id order.
SELECT r.id, r.schedule_id, r.task_id, r.scheduled_for_ms, r.created_at_ms
FROM ql3.runs AS r
WHERE %(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint
ORDER BY r.schedule_id, r.id
