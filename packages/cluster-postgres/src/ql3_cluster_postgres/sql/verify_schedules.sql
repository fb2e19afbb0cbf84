-- verify_history: every schedule with its definition, cursor, claim and quarantine, oldest first.
SELECT s.id,
       s.task_id,
       t.name,
       s.cron,
       s.timezone,
       s.misfire_policy,
       s.misfire_grace_ms,
       s.start_at_ms,
       s.end_at_ms,
       s.state,
       s.next_due_at_ms,
       s.claim_owner_id,
       s.claim_expires_at_ms,
       s.updated_at_ms,
       s.created_at_ms,
       s.invalid_reason,
       s.invalidated_at_ms
FROM ql3.trigger_schedules AS s
JOIN ql3.tasks AS t ON t.id = s.task_id
ORDER BY s.id
