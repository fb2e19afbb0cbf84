-- ScheduleAdmin (add and apply): how many consecutive failed Runs pause each schedule (NULL:
-- never), written in the transaction that writes its definition.
UPDATE ql3.trigger_schedules AS s
SET pause_after_failures = i.threshold
FROM unnest(%(schedule_ids)s::bigint[], %(thresholds)s::integer[]) AS i (schedule_id, threshold)
WHERE s.id = i.schedule_id AND s.pause_after_failures IS DISTINCT FROM i.threshold
