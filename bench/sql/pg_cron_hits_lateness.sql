-- Lateness of each job's row (its INSERT's clock_timestamp()) against the minute it belongs to,
-- over the measured minutes [m0_ms, m0_ms + minutes x 60 s): per minute, then over all (minute
-- NULL). A job that ran twice in one minute counts once (its first row) and in `extra_runs`.
WITH minutes AS (
    SELECT %(m0_ms)s::bigint + k * 60000 AS minute_ms
    FROM generate_series(0, %(minutes)s - 1) AS k
),
per_job AS (
    SELECT m.minute_ms, h.job,
           min(extract(epoch FROM h.at) * 1000 - m.minute_ms) AS late_ms,
           count(*) AS runs
    FROM minutes AS m
    JOIN public.pg_cron_hits AS h
      ON h.at >= to_timestamp(m.minute_ms / 1000.0)
     AND h.at < to_timestamp((m.minute_ms + 60000) / 1000.0)
    GROUP BY m.minute_ms, h.job
)
SELECT
    minute_ms,
    count(*) AS ran,
    sum(runs - 1)::bigint AS extra_runs,
    round(percentile_disc(0.5) WITHIN GROUP (ORDER BY late_ms), 1)::float8 AS p50_ms,
    round(percentile_disc(0.99) WITHIN GROUP (ORDER BY late_ms), 1)::float8 AS p99_ms,
    round(max(late_ms), 1)::float8 AS max_ms
FROM per_job
GROUP BY GROUPING SETS ((minute_ms), ())
ORDER BY minute_ms NULLS LAST
