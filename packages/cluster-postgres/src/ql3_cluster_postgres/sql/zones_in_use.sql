-- Adopting other zone rules: the zones of the schedules whose cursor the rules placed (active or
-- paused, with a cursor); only those can move.
SELECT DISTINCT s.timezone AS zone
FROM ql3.trigger_schedules AS s
WHERE s.state IN ('active', 'paused')
  AND s.next_due_at_ms IS NOT NULL
ORDER BY 1
