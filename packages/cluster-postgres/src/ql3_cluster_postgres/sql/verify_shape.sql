-- verify_history: every run id whose rows in runs, attempts and events do not have the admission
-- shape (DESIGN §5): one run, one first attempt, one run.admitted event and one attempt.queued event per
-- attempt, the run, its first attempt and run.admitted at the run's commit time and the earliest
-- attempt.queued with them (later attempts, queued by workers after a failure, and the events
-- workers append are the `attempts` rule's, verify_attempts.sql). A run id without a run is an
-- orphan (history has no FOREIGN KEYs on purpose, see the schema, so the checker is what proves
-- their integrity); the shape is judged only for runs in scope (occurrences at or after since_ms),
-- orphans always.
-- The three tables are read in run id order through their indexes and merged (Merge Append into
-- a GroupAggregate): nothing is sorted or hashed, whatever the size of the history. Each row gets
-- a slot; the counts per slot are what `SHAPE_COUNTS` (verify/_rules.py) names and expects.
SELECT g.run_id AS id,
       max(g.schedule_id) AS schedule_id,
       bool_or(g.in_scope) AS in_scope,
       count(*) FILTER (WHERE g.slot = 0) AS runs,
       count(*) FILTER (WHERE g.slot = 1) AS first_attempts,
       count(*) FILTER (WHERE g.slot = 2) AS later_attempts,
       count(*) FILTER (WHERE g.slot = 3) AS run_admitted,
       count(*) FILTER (WHERE g.slot = 4) AS attempt_queued,
       max(g.created_at_ms) FILTER (WHERE g.slot = 0) AS created_at_ms,
       min(g.created_at_ms) FILTER (WHERE g.slot IN (1, 3, 4)) AS admission_first_ms,
       max(g.created_at_ms) FILTER (WHERE g.slot IN (1, 3)) AS admission_last_ms
FROM (
    SELECT r.id AS run_id, 0 AS slot, r.created_at_ms, r.schedule_id,
           r.scheduled_for_ms >= %(since_ms)s AS in_scope
    FROM ql3.runs AS r
    UNION ALL
    SELECT a.run_id, CASE WHEN a.attempt_number = 1 THEN 1 ELSE 2 END, a.created_at_ms, NULL,
           NULL
    FROM ql3.attempts AS a
    UNION ALL
    SELECT e.run_id,
           CASE e.kind WHEN 'run.admitted' THEN 3 WHEN 'attempt.queued' THEN 4 ELSE 5 END,
           e.created_at_ms, NULL, NULL
    FROM ql3.events AS e
    ORDER BY 1
) AS g
GROUP BY g.run_id
HAVING count(*) FILTER (WHERE g.slot = 0) <> 1
    OR (
        bool_or(g.in_scope)
        AND (
            count(*) FILTER (WHERE g.slot = 1) <> 1
            OR count(*) FILTER (WHERE g.slot = 3) <> 1
            OR count(*) FILTER (WHERE g.slot = 4) <> count(*) FILTER (WHERE g.slot IN (1, 2))
            OR min(g.created_at_ms) FILTER (WHERE g.slot IN (0, 1, 3))
                <> max(g.created_at_ms) FILTER (WHERE g.slot IN (0, 1, 3))
            OR min(g.created_at_ms) FILTER (WHERE g.slot = 4)
                <> max(g.created_at_ms) FILTER (WHERE g.slot = 0)
        )
    )
ORDER BY g.run_id
