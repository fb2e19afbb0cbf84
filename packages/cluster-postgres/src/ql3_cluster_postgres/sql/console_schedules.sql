-- ConsoleReader (one page of the web console's schedules page: %(batch_limit)s schedules from
-- %(skip)s on, by name; or the head of one schedule's page when %(schedule_id)s is given): each
-- schedule's state and why (quarantine reason, open pause span), window, next due, its latest
-- Run's outcome (the latest attempt's state and exit code) and the admission lateness p50/p99 of
-- its latest cron Runs (at most %(lateness_runs)s) scheduled in the last hour of the DATABASE clock.
-- The page's schedules are picked first (schedules and tasks only, no history), so the probes of
-- ql3.runs run for this page's schedules alone, each a bounded walk of the
-- (schedule_id, scheduled_for_ms) unique index backwards: the cost does not grow with the history
-- nor with the number of schedules.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
listed AS MATERIALIZED (
    SELECT s.id, t.name
    FROM ql3.trigger_schedules AS s
    JOIN ql3.tasks AS t ON t.id = s.task_id
    WHERE (%(schedule_id)s::bigint IS NULL OR s.id = %(schedule_id)s::bigint)
    ORDER BY t.name, s.id
    OFFSET %(skip)s
    LIMIT %(batch_limit)s
)
SELECT obs.now_ms,
       s.id AS schedule_id,
       t.name,
       s.cron,
       s.timezone,
       s.misfire_policy,
       t.overlap,
       s.state,
       s.invalid_reason,
       p.reason AS pause_reason,
       p.cause AS pause_cause,
       p.paused_by,
       p.paused_at_ms,
       p.until_ms AS paused_until_ms,
       s.start_at_ms,
       s.end_at_ms,
       s.next_due_at_ms,
       s.claim_owner_id,
       last_run.run_id AS last_run_id,
       last_run.scheduled_for_ms AS last_scheduled_for_ms,
       last_attempt.state AS last_outcome,
       last_attempt.exit_code AS last_exit_code,
       late.runs AS runs_last_hour,
       late.p50_ms AS lateness_p50_ms,
       late.p99_ms AS lateness_p99_ms
FROM obs
CROSS JOIN listed
JOIN ql3.trigger_schedules AS s ON s.id = listed.id
JOIN ql3.tasks AS t ON t.id = s.task_id
LEFT JOIN ql3.schedule_pauses AS p ON p.schedule_id = s.id AND p.resumed_at_ms IS NULL
LEFT JOIN LATERAL (
    SELECT r.id AS run_id, r.scheduled_for_ms
    FROM ql3.runs AS r
    WHERE r.schedule_id = s.id
    ORDER BY r.scheduled_for_ms DESC
    LIMIT 1
) AS last_run ON true
LEFT JOIN LATERAL (
    SELECT a.state, a.exit_code
    FROM ql3.attempts AS a
    WHERE a.run_id = last_run.run_id
    ORDER BY a.attempt_number DESC
    LIMIT 1
) AS last_attempt ON true
LEFT JOIN LATERAL (
    SELECT count(*)::bigint AS runs,
           percentile_disc(0.5) WITHIN GROUP (ORDER BY recent.lateness_ms) AS p50_ms,
           percentile_disc(0.99) WITHIN GROUP (ORDER BY recent.lateness_ms) AS p99_ms
    FROM (
        SELECT r.created_at_ms - r.scheduled_for_ms AS lateness_ms
        FROM ql3.runs AS r
        WHERE r.schedule_id = s.id
          AND r.kind = 'cron'
          AND r.scheduled_for_ms >= obs.now_ms - 3600000
        ORDER BY r.scheduled_for_ms DESC
        LIMIT %(lateness_runs)s
    ) AS recent
) AS late ON true
ORDER BY listed.name, listed.id
