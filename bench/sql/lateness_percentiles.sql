-- Lateness = commit time (database) - occurrence time, over the runs of the window.
SELECT
    count(*) AS n,
    percentile_disc(0.5) WITHIN GROUP (ORDER BY created_at_ms - scheduled_for_ms) AS p50_ms,
    percentile_disc(0.99) WITHIN GROUP (ORDER BY created_at_ms - scheduled_for_ms) AS p99_ms,
    max(created_at_ms - scheduled_for_ms) AS max_ms,
    round(avg(created_at_ms - scheduled_for_ms), 2)::float8 AS mean_ms
FROM ql3.runs
WHERE scheduled_for_ms >= %(w0_ms)s AND scheduled_for_ms < %(w1_ms)s
