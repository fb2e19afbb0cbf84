-- verify_history (rule `attempts`, timing): each later attempt (number 2 and up) of a run in scope
-- that breaks a rule of time or number: a number above its task's max_attempts; a start before
-- its predecessor ended (two attempts live at once, [started, finished) overlapping), or before
-- that end plus its task's retry backoff; a predecessor that succeeded after this one started.
-- Only numbers above 1 can break these, so a history without retries returns nothing; the
-- predecessor is found by the UNIQUE (run_id, attempt_number).
SELECT r.schedule_id,
       a.run_id,
       a.id,
       a.attempt_number,
       a.state,
       a.started_at_ms,
       a.finished_at_ms,
       k.max_attempts,
       k.retry_backoff_ms,
       p.id AS before_id,
       p.state AS before_state,
       p.started_at_ms AS before_started_ms,
       p.finished_at_ms AS before_finished_ms
FROM ql3.attempts AS a
JOIN ql3.runs AS r ON r.id = a.run_id
JOIN ql3.tasks AS k ON k.id = r.task_id
LEFT JOIN ql3.attempts AS p ON p.run_id = a.run_id AND p.attempt_number = a.attempt_number - 1
WHERE a.attempt_number > 1
  AND r.scheduled_for_ms >= %(since_ms)s
  AND (
      a.attempt_number > k.max_attempts
      OR (
          a.started_at_ms IS NOT NULL
          AND p.started_at_ms IS NOT NULL
          AND (p.finished_at_ms IS NULL
               OR a.started_at_ms < p.finished_at_ms + k.retry_backoff_ms)
      )
  )
ORDER BY a.run_id, a.attempt_number, a.id
