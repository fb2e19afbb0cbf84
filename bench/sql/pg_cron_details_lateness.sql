-- pg_cron's own record of each job run (cron.job_run_details): start and end against the minute
-- the start falls in, over the measured minutes; per minute, then over all (minute NULL).
WITH minutes AS (
    SELECT %(m0_ms)s::bigint + k * 60000 AS minute_ms
    FROM generate_series(0, %(minutes)s - 1) AS k
),
d AS (
    SELECT m.minute_ms, r.status,
           extract(epoch FROM r.start_time) * 1000 - m.minute_ms AS start_ms,
           extract(epoch FROM r.end_time) * 1000 - m.minute_ms AS end_ms
    FROM minutes AS m
    JOIN cron.job_run_details AS r
      ON r.start_time >= to_timestamp(m.minute_ms / 1000.0)
     AND r.start_time < to_timestamp((m.minute_ms + 60000) / 1000.0)
)
SELECT
    minute_ms,
    count(*) AS runs,
    count(*) FILTER (WHERE status = 'succeeded') AS succeeded,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    round(percentile_disc(0.5) WITHIN GROUP (ORDER BY start_ms), 1)::float8 AS start_p50_ms,
    round(percentile_disc(0.99) WITHIN GROUP (ORDER BY start_ms), 1)::float8 AS start_p99_ms,
    round(max(start_ms), 1)::float8 AS start_max_ms,
    round(percentile_disc(0.5) WITHIN GROUP (ORDER BY end_ms), 1)::float8 AS end_p50_ms,
    round(percentile_disc(0.99) WITHIN GROUP (ORDER BY end_ms), 1)::float8 AS end_p99_ms,
    round(max(end_ms), 1)::float8 AS end_max_ms
FROM d
GROUP BY GROUPING SETS ((minute_ms), ())
ORDER BY minute_ms NULLS LAST
