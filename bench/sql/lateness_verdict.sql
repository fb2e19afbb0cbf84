-- The verdict of a lateness window for every-second schedules: each active schedule is expected
-- once per second boundary in [w0_ms, w1_ms); compare with the runs the database holds.
WITH occ AS (
    SELECT s.id AS schedule_id, t.t AS scheduled_for_ms
    FROM ql3.trigger_schedules AS s
    CROSS JOIN generate_series(%(w0_ms)s::bigint, %(w1_ms)s::bigint - 1000, 1000) AS t (t)
    WHERE s.state = 'active'
),
r AS (
    SELECT schedule_id, scheduled_for_ms, count(*) AS n,
           bool_or(created_at_ms < scheduled_for_ms) AS early
    FROM ql3.runs
    WHERE scheduled_for_ms >= %(w0_ms)s AND scheduled_for_ms < %(w1_ms)s
    GROUP BY schedule_id, scheduled_for_ms
)
SELECT
    (SELECT count(*) FROM occ) AS expected,
    (SELECT count(*) FROM occ JOIN r USING (schedule_id, scheduled_for_ms)) AS admitted,
    (SELECT count(*) FROM occ LEFT JOIN r USING (schedule_id, scheduled_for_ms)
      WHERE r.n IS NULL) AS missing,
    (SELECT coalesce(sum(n - 1), 0)::bigint FROM r) AS duplicates,
    (SELECT count(*) FROM r WHERE r.early) AS early,
    (SELECT count(*) FROM r LEFT JOIN occ USING (schedule_id, scheduled_for_ms)
      WHERE occ.schedule_id IS NULL) AS unexpected
