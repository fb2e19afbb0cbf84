-- HistoryReader.alerts (`ql3 alerts list`): the latest alerts, optionally of one kind and one
-- schedule (by name), with their delivery outcome so far; newest first.
SELECT a.id AS alert_id, a.kind, k.name AS schedule, a.subject_key, a.run_id, a.occurrence_ms,
       a.raised_at_ms, a.delivery_state, a.delivery_attempts, a.delivered_at_ms,
       a.next_delivery_at_ms,
       (SELECT d.error FROM ql3.alert_deliveries AS d
        WHERE d.alert_id = a.id ORDER BY d.attempt_number DESC LIMIT 1) AS last_error
FROM ql3.alerts AS a
JOIN ql3.trigger_schedules AS s ON s.id = a.schedule_id
JOIN ql3.tasks AS k ON k.id = s.task_id
WHERE (%(kind)s::text IS NULL OR a.kind = %(kind)s::text)
  AND (%(schedule)s::text IS NULL OR k.name = %(schedule)s::text)
ORDER BY a.id DESC
LIMIT %(batch_limit)s::integer
