-- The oracle's schedules: definition, state, cursor and claim, as stored (judged in Python).
SELECT s.id,
       s.task_id,
       s.cron,
       s.timezone,
       s.misfire_policy,
       s.misfire_grace_ms,
       s.start_at_ms,
       s.end_at_ms,
       s.state,
       s.next_due_at_ms,
       s.claim_owner_id,
       s.claim_expires_at_ms
FROM ql3.trigger_schedules AS s
ORDER BY s.id
