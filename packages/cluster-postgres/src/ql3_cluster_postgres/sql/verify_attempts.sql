-- verify_history: every attempt of the runs in scope, in number order, with the events that
-- name it counted by kind, for the `attempts` rule (issue 13): numbers 1..n, at most one live,
-- a successor only after an attempt that ended without success, and each attempt's events
-- telling its own story (one attempt.queued; one attempt.running per take, each take but the
-- last released; one final event, of its final state).
WITH scoped AS (
    SELECT r.id, r.schedule_id
    FROM ql3.runs AS r
    WHERE %(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint
),
event_counts AS (
    SELECT e.attempt_id,
           count(*) FILTER (WHERE e.kind = 'attempt.queued') AS queued_events,
           count(*) FILTER (WHERE e.kind = 'attempt.running') AS running_events,
           count(*) FILTER (WHERE e.kind = 'attempt.released') AS released_events,
           count(*) FILTER (
               WHERE e.kind IN ('attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                                'attempt.abandoned')
           ) AS final_events,
           min(e.kind) FILTER (
               WHERE e.kind IN ('attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                                'attempt.abandoned')
           ) AS final_kind
    FROM ql3.events AS e
    JOIN scoped AS s ON s.id = e.run_id
    WHERE e.attempt_id IS NOT NULL
    GROUP BY e.attempt_id
)
SELECT s.schedule_id,
       a.run_id,
       a.id,
       a.attempt_number,
       a.state,
       coalesce(c.queued_events, 0) AS queued_events,
       coalesce(c.running_events, 0) AS running_events,
       coalesce(c.released_events, 0) AS released_events,
       coalesce(c.final_events, 0) AS final_events,
       c.final_kind
FROM ql3.attempts AS a
JOIN scoped AS s ON s.id = a.run_id
LEFT JOIN event_counts AS c ON c.attempt_id = a.id
ORDER BY a.run_id, a.attempt_number
