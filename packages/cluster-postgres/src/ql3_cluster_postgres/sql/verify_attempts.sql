-- verify_history: the attempts of the runs in scope whose attempts or attempt events break the
-- `attempts` rule (DESIGN §10), each with the events that name it counted by kind, in run and number
-- order: numbers 1..n, at most one live, a successor only after an attempt that ended without
-- success, and each attempt's events telling its own story (one attempt.queued; one
-- attempt.running per take, each take but the last released; one final event, of its final
-- state, skipped and cancelled included: migration 0009). The rule is judged here and only offending runs come back, so a history of millions of
-- healthy runs costs no Python time; `verify/_attempts` names what is wrong with each (the same
-- rules, written once more in Python for the messages; test_verify_attempts plants each fault).
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
                                'attempt.abandoned', 'attempt.skipped', 'attempt.cancelled')
           ) AS final_events,
           min(e.kind) FILTER (
               WHERE e.kind IN ('attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                                'attempt.abandoned', 'attempt.skipped', 'attempt.cancelled')
           ) AS final_kind
    FROM ql3.events AS e
    WHERE e.attempt_id IS NOT NULL
    GROUP BY e.attempt_id
),
judged AS (
    SELECT s.schedule_id,
           a.run_id,
           a.id,
           a.attempt_number,
           a.state,
           a.started_at_ms,
           coalesce(c.queued_events, 0) AS queued_events,
           coalesce(c.running_events, 0) AS running_events,
           coalesce(c.released_events, 0) AS released_events,
           coalesce(c.final_events, 0) AS final_events,
           c.final_kind,
           -- The attempt's own story.
           (coalesce(c.queued_events, 0) <> 1
            OR coalesce(c.running_events, 0)
               <> coalesce(c.released_events, 0)
                  + (a.state NOT IN ('queued', 'skipped')
                     AND NOT (a.state = 'cancelled' AND a.started_at_ms IS NULL))::int
            OR coalesce(c.final_events, 0) <> (a.state NOT IN ('queued', 'running'))::int
            OR (a.state NOT IN ('queued', 'running')
                AND c.final_kind IS DISTINCT FROM 'attempt.' || a.state)
            -- Its place among the run's attempts.
            OR lag(a.state) OVER w NOT IN ('failed', 'timed_out', 'abandoned')
            OR a.attempt_number <> row_number() OVER w
            OR count(*) FILTER (WHERE a.state IN ('queued', 'running')) OVER r > 1
           ) AS broken
    FROM ql3.attempts AS a
    JOIN scoped AS s ON s.id = a.run_id
    LEFT JOIN event_counts AS c ON c.attempt_id = a.id
    WINDOW w AS (PARTITION BY a.run_id ORDER BY a.attempt_number, a.id),
           r AS (PARTITION BY a.run_id)
),
broken_runs AS (
    SELECT DISTINCT j.run_id FROM judged AS j WHERE j.broken
)
SELECT j.schedule_id, j.run_id, j.id, j.attempt_number, j.state, j.started_at_ms,
       j.queued_events, j.running_events, j.released_events, j.final_events, j.final_kind
FROM judged AS j
JOIN broken_runs AS b ON b.run_id = j.run_id
ORDER BY j.run_id, j.attempt_number, j.id
