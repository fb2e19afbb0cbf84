-- verify_history: the `attempts` rule (DESIGN §10) attempt by attempt, for the runs verify_shape.sql
-- marked (`attempts_suspect`: more than one attempt, none, or a single attempt it found broken),
-- given as %(run_ids)s, a bounded batch at a time. Returned: every attempt of each run that breaks
-- the rule, with the events naming it counted by kind, in run and number order: numbers 1..n, at
-- most one live, a successor only after an attempt that ended without success, and each
-- attempt's events telling its own story (one attempt.queued; one attempt.running per take, each
-- take but the last released; one final event, of its final state, skipped and cancelled
-- included: migration 0009). Events are grouped by their own run and the attempt they name, so
-- an event naming an attempt that is not one of its run's comes back as a row of its own with
-- `attempt_rows` 0 (no attempt of that id in the run). `verify/_attempts` names what is wrong
-- with each (the same rules, written once more in Python for the messages; test_verify_attempts
-- plants each fault). Only these runs' rows are read, through the run indexes of attempts and
-- events.
WITH attempt_rows AS (
    SELECT a.run_id, a.id, a.attempt_number, a.state, a.started_at_ms
    FROM ql3.attempts AS a
    WHERE a.run_id = ANY (%(run_ids)s::bigint[])
),
event_counts AS (
    SELECT e.run_id,
           e.attempt_id,
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
    WHERE e.run_id = ANY (%(run_ids)s::bigint[]) AND e.attempt_id IS NOT NULL
    GROUP BY e.run_id, e.attempt_id
),
per_attempt AS (
    SELECT coalesce(a.run_id, c.run_id) AS run_id,
           coalesce(a.id, c.attempt_id) AS id,
           (a.id IS NOT NULL)::int AS attempt_rows,
           a.attempt_number,
           a.state,
           a.started_at_ms,
           coalesce(c.queued_events, 0) AS queued_events,
           coalesce(c.running_events, 0) AS running_events,
           coalesce(c.released_events, 0) AS released_events,
           coalesce(c.final_events, 0) AS final_events,
           c.final_kind
    FROM attempt_rows AS a
    FULL JOIN event_counts AS c ON c.run_id = a.run_id AND c.attempt_id = a.id
),
judged AS (
    SELECT p.*,
           coalesce(
               p.attempt_rows = 0
               -- The attempt's own story.
               OR p.queued_events <> 1
               OR p.running_events
                  <> p.released_events
                     + (p.state NOT IN ('queued', 'skipped')
                        AND NOT (p.state = 'cancelled' AND p.started_at_ms IS NULL))::int
               OR p.final_events <> (p.state NOT IN ('queued', 'running'))::int
               OR (p.state NOT IN ('queued', 'running')
                   AND p.final_kind IS DISTINCT FROM 'attempt.' || p.state)
               -- Its place among the run's attempts.
               OR lag(p.state) OVER w NOT IN ('failed', 'timed_out', 'abandoned')
               OR p.attempt_number <> row_number() OVER w
               OR count(*) FILTER (WHERE p.state IN ('queued', 'running')) OVER r > 1,
               false
           ) AS broken
    FROM per_attempt AS p
    -- Events naming no attempt of their run (no number) sort last and do not shift the numbering.
    WINDOW w AS (PARTITION BY p.run_id ORDER BY p.attempt_number, p.id),
           r AS (PARTITION BY p.run_id)
),
marked AS (
    SELECT j.*, bool_or(j.broken) OVER (PARTITION BY j.run_id) AS run_broken
    FROM judged AS j
)
SELECT ru.schedule_id, m.run_id, m.id, m.attempt_rows, m.attempt_number, m.state,
       m.started_at_ms, m.queued_events, m.running_events, m.released_events, m.final_events,
       m.final_kind
FROM marked AS m
JOIN ql3.runs AS ru ON ru.id = m.run_id
WHERE m.run_broken
ORDER BY m.run_id, m.attempt_number, m.id
