-- verify_history: runs in scope whose admission rows are not exactly one first attempt plus one
-- run.admitted and one attempt.queued event of that attempt, all written at the run's commit time
-- (D5). Later attempts (retries) and their events are the `attempts` rule's (verify_attempts).
WITH scoped AS (
    SELECT r.id, r.schedule_id, r.created_at_ms
    FROM ql3.runs AS r
    WHERE %(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint
),
attempt_counts AS (
    SELECT a.run_id,
           count(*) FILTER (WHERE a.attempt_number = 1) AS attempts,
           count(*) FILTER (
               WHERE a.attempt_number = 1 AND a.created_at_ms <> s.created_at_ms
           ) AS attempts_off_time
    FROM ql3.attempts AS a
    JOIN scoped AS s ON s.id = a.run_id
    GROUP BY a.run_id
),
event_counts AS (
    SELECT e.run_id,
           count(*) FILTER (WHERE e.kind = 'run.admitted') AS run_admitted,
           count(*) FILTER (WHERE e.kind = 'attempt.queued' AND a.attempt_number = 1)
               AS attempt_queued,
           count(*) FILTER (
               WHERE (e.kind = 'run.admitted'
                      OR (e.kind = 'attempt.queued' AND a.attempt_number = 1))
               AND e.created_at_ms <> s.created_at_ms
           ) AS events_off_time
    FROM ql3.events AS e
    JOIN scoped AS s ON s.id = e.run_id
    LEFT JOIN ql3.attempts AS a ON a.id = e.attempt_id
    GROUP BY e.run_id
)
SELECT s.id,
       s.schedule_id,
       coalesce(a.attempts, 0) AS attempts,
       coalesce(a.attempts_off_time, 0) AS attempts_off_time,
       coalesce(e.run_admitted, 0) AS run_admitted,
       coalesce(e.attempt_queued, 0) AS attempt_queued,
       coalesce(e.events_off_time, 0) AS events_off_time
FROM scoped AS s
LEFT JOIN attempt_counts AS a ON a.run_id = s.id
LEFT JOIN event_counts AS e ON e.run_id = s.id
WHERE coalesce(a.attempts, 0) <> 1
   OR coalesce(a.attempts_off_time, 0) <> 0
   OR coalesce(e.run_admitted, 0) <> 1
   OR coalesce(e.attempt_queued, 0) <> 1
   OR coalesce(e.events_off_time, 0) <> 0
ORDER BY s.id
