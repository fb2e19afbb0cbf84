-- ScheduleAdmin: lock the schedule rows of the given names (all when names is NULL) for the
-- rest of the admin transaction, then read them.
SELECT s.id, s.task_id, t.name, s.cron, s.timezone, s.misfire_policy, s.misfire_grace_ms,
       s.start_at_ms, s.end_at_ms, s.state, s.next_due_at_ms, s.claim_owner_id,
       s.claim_expires_at_ms, s.version, s.updated_at_ms, s.created_at_ms, s.invalid_reason,
       s.invalidated_at_ms
FROM ql3.trigger_schedules AS s
JOIN ql3.tasks AS t ON t.id = s.task_id
WHERE %(names)s::text[] IS NULL OR t.name = ANY (%(names)s::text[])
ORDER BY t.name
FOR UPDATE OF s
