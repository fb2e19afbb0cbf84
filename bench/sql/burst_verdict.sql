-- The verdict of a burst: every active schedule is expected once at `at_ms`; how many were
-- admitted, missing, twice or early, and the lateness (commit time - occurrence) of the burst.
WITH r AS (
    SELECT schedule_id, count(*) AS n, min(created_at_ms - scheduled_for_ms) AS first_late,
           max(created_at_ms - scheduled_for_ms) AS late
    FROM ql3.runs
    WHERE scheduled_for_ms = %(at_ms)s
    GROUP BY schedule_id
)
SELECT
    (SELECT count(*) FROM ql3.trigger_schedules WHERE state = 'active') AS expected,
    (SELECT count(*) FROM r) AS admitted,
    (SELECT count(*) FROM ql3.trigger_schedules AS s LEFT JOIN r ON r.schedule_id = s.id
      WHERE s.state = 'active' AND r.schedule_id IS NULL) AS missing,
    (SELECT coalesce(sum(n - 1), 0)::bigint FROM r) AS duplicates,
    (SELECT count(*) FROM r WHERE first_late < 0) AS early,
    (SELECT min(first_late) FROM r) AS first_ms,
    (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY late) FROM r) AS p50_ms,
    (SELECT percentile_disc(0.99) WITHIN GROUP (ORDER BY late) FROM r) AS p99_ms,
    (SELECT max(late) FROM r) AS drain_ms
