-- ScheduleAdmin.pauses: the recorded paused spans of the given schedules (all when names is
-- NULL), oldest first, with the database time they were read at.
SELECT p.id AS pause_id, t.name, p.schedule_id, p.paused_at_ms, p.paused_by, p.reason,
       p.until_ms, p.first_held_ms, p.cause, p.failure_threshold, p.last_failed_run_id,
       p.resumed_at_ms, p.resumed_by, p.replay, p.automatic, p.end_ms, p.skipped_count
FROM ql3.schedule_pauses AS p
JOIN ql3.trigger_schedules AS s ON s.id = p.schedule_id
JOIN ql3.tasks AS t ON t.id = s.task_id
WHERE %(names)s::text[] IS NULL OR t.name = ANY (%(names)s::text[])
ORDER BY t.name, p.paused_at_ms, p.id
