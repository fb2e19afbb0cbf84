-- Adopting other zone rules: lock, for the rest of the transaction, the schedules with a cursor
-- (active or paused) in the zones whose rule data changed; a claim or commit in flight on one of
-- them finishes first, and every later commit of a claim on them fails its fence (the version
-- moves). Read by name like lock_schedules.sql.
SELECT s.id, t.name, s.cron, s.timezone, s.misfire_policy, s.misfire_grace_ms, s.start_at_ms,
       s.end_at_ms, s.state, s.next_due_at_ms
FROM ql3.trigger_schedules AS s
JOIN ql3.tasks AS t ON t.id = s.task_id
WHERE s.state IN ('active', 'paused')
  AND s.next_due_at_ms IS NOT NULL
  AND s.timezone = ANY (%(zones)s::text[])
ORDER BY s.id
FOR UPDATE OF s
