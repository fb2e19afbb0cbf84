-- verify_history (rule `overlap`, DESIGN §10, §14): what the overlap policy decided, from the
-- attempts' database times and the skip records of reason overlap, returning violations only:
-- - record_without_run: an overlap skip record with no cron Run at its occurrence (the take that
--   skips a Run writes both);
-- - record_run_executed: an overlap skip record whose Run was started by a worker;
-- - record_run_not_skipped: an overlap skip record whose Run has no attempt that ended skipped;
-- - skipped_without_record: a cron Run whose attempt ended skipped with no overlap record;
-- - too_many_live: under a cap (skip, replace, or allow with max_running: the task's current
--   policy), more attempts of the schedule in
--   [started_at_ms, finished_at_ms) at one instant than its max_running (a running attempt counts
--   until the snapshot's now, a cancelled one until its cancellation). One row per schedule: the
--   first start that crowded it, with how many were live then.
-- Ends come before starts at the same instant: a Run started by the take that cancelled another
-- does not overlap it.
-- Only the few rows that can break these rules are read: the overlap skip records, each with its
-- Run and that Run's attempts through their index, and the attempts that ended skipped (one pass
-- over attempts, no join or aggregate over the whole history), each with its Run by key.
WITH record_problems AS (
    SELECT k.schedule_id,
           CASE
               WHEN r.id IS NULL THEN 'record_without_run'
               WHEN st.executed THEN 'record_run_executed'
               WHEN NOT st.skipped THEN 'record_run_not_skipped'
           END AS problem,
           k.id AS skip_id, r.id AS run_id, k.first_skipped_ms AS at_ms,
           NULL::bigint AS live, NULL::integer AS cap
    FROM ql3.skipped_occurrences AS k
    LEFT JOIN ql3.runs AS r
      ON r.schedule_id = k.schedule_id AND r.scheduled_for_ms = k.first_skipped_ms
     AND r.kind = 'cron'
    LEFT JOIN LATERAL (
        -- A Run before the scope has no attempts judged: neither executed nor skipped.
        SELECT coalesce(bool_or(a.started_at_ms IS NOT NULL), false) AS executed,
               coalesce(bool_or(a.state = 'skipped'), false) AS skipped
        FROM ql3.attempts AS a
        WHERE a.run_id = r.id AND r.scheduled_for_ms >= %(since_ms)s::bigint
    ) AS st ON true
    WHERE k.reason = 'overlap' AND k.last_skipped_ms >= %(since_ms)s::bigint
),
unrecorded AS (
    SELECT DISTINCT ON (r.id)
           r.schedule_id, 'skipped_without_record' AS problem, NULL::bigint AS skip_id,
           r.id AS run_id, r.scheduled_for_ms AS at_ms, NULL::bigint AS live, NULL::integer AS cap
    FROM ql3.attempts AS a
    JOIN ql3.runs AS r ON r.id = a.run_id
    WHERE a.state = 'skipped'
      AND r.kind = 'cron'
      AND r.scheduled_for_ms >= %(since_ms)s::bigint
      AND NOT EXISTS (
          SELECT FROM ql3.skipped_occurrences AS k
          WHERE k.reason = 'overlap'
            AND k.schedule_id = r.schedule_id
            AND k.first_skipped_ms = r.scheduled_for_ms
      )
    ORDER BY r.id
),
spans AS (
    SELECT r.schedule_id, a.id, a.run_id, a.started_at_ms AS started_ms,
           coalesce(a.finished_at_ms, %(now_ms)s::bigint) AS ended_ms, k.max_running AS cap
    FROM ql3.attempts AS a
    JOIN ql3.runs AS r ON r.id = a.run_id
    JOIN ql3.tasks AS k ON k.id = r.task_id
    WHERE k.max_running IS NOT NULL
      AND a.started_at_ms IS NOT NULL
      AND coalesce(a.finished_at_ms, %(now_ms)s::bigint) >= %(since_ms)s::bigint
),
edges AS (
    SELECT p.schedule_id, p.started_ms AS at_ms, 1 AS delta, p.id, p.run_id, p.cap FROM spans AS p
    UNION ALL
    SELECT p.schedule_id, p.ended_ms, -1, p.id, p.run_id, p.cap FROM spans AS p
),
swept AS (
    SELECT e.schedule_id, e.at_ms, e.delta, e.id, e.run_id, e.cap,
           sum(e.delta) OVER (
               PARTITION BY e.schedule_id ORDER BY e.at_ms, e.delta, e.id
               ROWS UNBOUNDED PRECEDING
           ) AS live
    FROM edges AS e
),
crowded AS (
    SELECT DISTINCT ON (w.schedule_id)
           w.schedule_id, 'too_many_live' AS problem, NULL::bigint AS skip_id, w.run_id,
           w.at_ms, w.live, w.cap
    FROM swept AS w
    WHERE w.delta = 1 AND w.live > w.cap
    ORDER BY w.schedule_id, w.at_ms, w.id
)
SELECT x.schedule_id, x.problem, x.skip_id, x.run_id, x.at_ms, x.live, x.cap
FROM (
    SELECT * FROM record_problems WHERE problem IS NOT NULL
    UNION ALL
    SELECT * FROM unrecorded
    UNION ALL
    SELECT * FROM crowded
) AS x
ORDER BY x.schedule_id, x.at_ms, x.problem
