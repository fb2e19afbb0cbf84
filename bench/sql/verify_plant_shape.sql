-- Bench setup only (verify): lose one run's run.admitted event: `shape` (and only it: losing its
-- attempt.queued would break the `attempts` rule as well).
DELETE FROM ql3.events AS e
USING ql3.runs AS r
WHERE r.schedule_id = %(schedule_id)s
  AND r.scheduled_for_ms = %(at_ms)s
  AND e.run_id = r.id
  AND e.kind = 'run.admitted'
