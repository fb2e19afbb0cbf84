-- `ql3 zone-rules adopt --dry-run`: the schedules an adopt would move (lock_zone_schedules.sql
-- without the lock: a dry run changes nothing and holds nobody up).
SELECT s.id, t.name, s.cron, s.timezone, s.misfire_policy, s.misfire_grace_ms, s.start_at_ms,
       s.end_at_ms, s.state, s.next_due_at_ms
FROM ql3.trigger_schedules AS s
JOIN ql3.tasks AS t ON t.id = s.task_id
WHERE s.state IN ('active', 'paused')
  AND s.next_due_at_ms IS NOT NULL
  AND s.timezone = ANY (%(zones)s::text[])
ORDER BY s.id
