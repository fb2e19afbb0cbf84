-- verify_history: every run id whose rows in runs, attempts and events do not have the admission
-- shape (DESIGN §5), and every run whose attempts the `attempts` rule must look at closely.
-- The shape: one run, one first attempt, one run.admitted event and one attempt.queued event per
-- attempt, the run, its first attempt and run.admitted at the run's commit time and the earliest
-- attempt.queued with them (later attempts, queued by workers after a failure, and the events
-- workers append are the `attempts` rule's). A run id without a run is an orphan (history has no
-- FOREIGN KEYs on purpose, see the schema, so the checker is what proves their integrity); the
-- shape is judged only for runs in scope (occurrences at or after since_ms), orphans always.
-- The attempts: a run in scope with exactly one attempt is judged whole here (numbered 1, every
-- event naming an attempt names that one, one attempt.queued, one attempt.running per take, one
-- final event of its final state: the rules of verify_attempts.sql for a single attempt), and
-- `attempts_suspect` marks every other in-scope run (more than one attempt, none, or any of those
-- rules broken); `verify/_check` hands the marked runs to verify_attempts.sql, which judges them
-- attempt by attempt. A healthy history of millions of single-attempt runs is thus judged in this
-- one pass, with no second read of attempts and events.
-- The three tables are read in run id order through their indexes and merged (Merge Append into
-- a GroupAggregate): nothing is sorted or hashed, whatever the size of the history. Each row gets
-- a slot; the counts per slot are what `SHAPE_COUNTS` (verify/_rules.py) names and expects.
SELECT d.*
FROM (
    SELECT c.id, c.schedule_id, c.in_scope, c.runs, c.first_attempts, c.later_attempts,
           c.run_admitted, c.attempt_queued, c.created_at_ms, c.admission_first_ms,
           c.admission_last_ms, c.shape_broken,
           coalesce(
               c.in_scope AND c.runs = 1 AND NOT (
                   c.first_attempts = 1
                   AND c.later_attempts = 0
                   AND c.event_attempt_min = c.attempt_id
                   AND c.event_attempt_max = c.attempt_id
                   AND c.queued_events = 1
                   AND c.running_events
                       = c.released_events
                         + (c.state NOT IN ('queued', 'skipped')
                            AND NOT (c.state = 'cancelled' AND c.started_at_ms IS NULL))::int
                   AND c.final_events = (c.state NOT IN ('queued', 'running'))::int
                   AND (c.state IN ('queued', 'running') OR c.final_kind = 'attempt.' || c.state)
               ),
               true
           ) AS attempts_suspect
    FROM (
        SELECT g.run_id AS id,
               max(g.schedule_id) AS schedule_id,
               coalesce(bool_or(g.in_scope), false) AS in_scope,
               count(*) FILTER (WHERE g.slot = 0) AS runs,
               count(*) FILTER (WHERE g.slot = 1) AS first_attempts,
               count(*) FILTER (WHERE g.slot = 2) AS later_attempts,
               count(*) FILTER (WHERE g.slot = 3) AS run_admitted,
               count(*) FILTER (WHERE g.slot = 4) AS attempt_queued,
               max(g.created_at_ms) FILTER (WHERE g.slot = 0) AS created_at_ms,
               min(g.created_at_ms) FILTER (WHERE g.slot IN (1, 3, 4)) AS admission_first_ms,
               max(g.created_at_ms) FILTER (WHERE g.slot IN (1, 3)) AS admission_last_ms,
               count(*) FILTER (WHERE g.slot = 0) <> 1
               OR (
                   coalesce(bool_or(g.in_scope), false)
                   AND (
                       count(*) FILTER (WHERE g.slot = 1) <> 1
                       OR count(*) FILTER (WHERE g.slot = 3) <> 1
                       OR count(*) FILTER (WHERE g.slot = 4)
                          <> count(*) FILTER (WHERE g.slot IN (1, 2))
                       OR min(g.created_at_ms) FILTER (WHERE g.slot IN (0, 1, 3))
                           <> max(g.created_at_ms) FILTER (WHERE g.slot IN (0, 1, 3))
                       OR min(g.created_at_ms) FILTER (WHERE g.slot = 4)
                           <> max(g.created_at_ms) FILTER (WHERE g.slot = 0)
                   )
               ) AS shape_broken,
               -- The single attempt's own columns, and the events that name an attempt.
               max(g.attempt_id) FILTER (WHERE g.slot IN (1, 2)) AS attempt_id,
               max(g.state) FILTER (WHERE g.slot IN (1, 2)) AS state,
               max(g.started_at_ms) FILTER (WHERE g.slot IN (1, 2)) AS started_at_ms,
               min(g.attempt_id) FILTER (WHERE g.slot >= 3) AS event_attempt_min,
               max(g.attempt_id) FILTER (WHERE g.slot >= 3) AS event_attempt_max,
               count(g.attempt_id) FILTER (WHERE g.slot = 4) AS queued_events,
               count(g.attempt_id) FILTER (WHERE g.kind = 'attempt.running') AS running_events,
               count(g.attempt_id) FILTER (WHERE g.kind = 'attempt.released') AS released_events,
               count(g.attempt_id) FILTER (
                   WHERE g.kind IN ('attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                                    'attempt.abandoned', 'attempt.skipped', 'attempt.cancelled')
               ) AS final_events,
               min(g.kind) FILTER (
                   WHERE g.attempt_id IS NOT NULL
                     AND g.kind IN ('attempt.succeeded', 'attempt.failed', 'attempt.timed_out',
                                    'attempt.abandoned', 'attempt.skipped', 'attempt.cancelled')
               ) AS final_kind
        FROM (
            SELECT r.id AS run_id, 0 AS slot, r.created_at_ms, r.schedule_id,
                   r.scheduled_for_ms >= %(since_ms)s AS in_scope, NULL::bigint AS attempt_id,
                   NULL::text AS state, NULL::bigint AS started_at_ms, NULL::text AS kind
            FROM ql3.runs AS r
            UNION ALL
            SELECT a.run_id, CASE WHEN a.attempt_number = 1 THEN 1 ELSE 2 END, a.created_at_ms, NULL,
                   NULL, a.id, a.state, a.started_at_ms, NULL
            FROM ql3.attempts AS a
            UNION ALL
            SELECT e.run_id,
                   CASE e.kind WHEN 'run.admitted' THEN 3 WHEN 'attempt.queued' THEN 4 ELSE 5 END,
                   e.created_at_ms, NULL, NULL, e.attempt_id, NULL, NULL, e.kind
            FROM ql3.events AS e
            ORDER BY 1
        ) AS g
        GROUP BY g.run_id
    ) AS c
) AS d
WHERE d.shape_broken OR d.attempts_suspect
ORDER BY d.id
