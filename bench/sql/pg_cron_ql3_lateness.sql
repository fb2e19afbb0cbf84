-- The QL3 side's verdict over the measured minutes [m0_ms, m0_ms + minutes x 60 s), per minute
-- then over all (minute NULL): Runs admitted (a schedule's second Run of one minute is a
-- duplicate), early ones, admission lateness (commit time - occurrence), and the first attempt's
-- start (taken by a worker) and end against the occurrence. All times are the database's.
WITH minutes AS (
    SELECT %(m0_ms)s::bigint + k * 60000 AS minute_ms
    FROM generate_series(0, %(minutes)s - 1) AS k
),
r AS (
    SELECT r.scheduled_for_ms AS minute_ms,
           r.created_at_ms - r.scheduled_for_ms AS admit_ms,
           a.started_at_ms - r.scheduled_for_ms AS start_ms,
           a.finished_at_ms - r.scheduled_for_ms AS end_ms,
           row_number() OVER (PARTITION BY r.scheduled_for_ms, r.schedule_id ORDER BY r.id) AS nth
    FROM ql3.runs AS r
    LEFT JOIN ql3.attempts AS a ON a.run_id = r.id AND a.attempt_number = 1
    WHERE r.scheduled_for_ms IN (SELECT minute_ms FROM minutes)
)
SELECT
    minute_ms,
    count(*) FILTER (WHERE nth = 1) AS admitted,
    count(*) FILTER (WHERE nth > 1) AS duplicates,
    count(*) FILTER (WHERE admit_ms < 0) AS early,
    percentile_disc(0.5) WITHIN GROUP (ORDER BY admit_ms)::float8 AS admit_p50_ms,
    percentile_disc(0.99) WITHIN GROUP (ORDER BY admit_ms)::float8 AS admit_p99_ms,
    max(admit_ms)::float8 AS admit_max_ms,
    count(start_ms) AS started,
    count(end_ms) AS finished,
    percentile_disc(0.5) WITHIN GROUP (ORDER BY start_ms)::float8 AS start_p50_ms,
    percentile_disc(0.99) WITHIN GROUP (ORDER BY start_ms)::float8 AS start_p99_ms,
    max(start_ms)::float8 AS start_max_ms,
    percentile_disc(0.5) WITHIN GROUP (ORDER BY end_ms)::float8 AS end_p50_ms,
    percentile_disc(0.99) WITHIN GROUP (ORDER BY end_ms)::float8 AS end_p99_ms,
    max(end_ms)::float8 AS end_max_ms
FROM r
GROUP BY GROUPING SETS ((minute_ms), ())
ORDER BY minute_ms NULLS LAST
