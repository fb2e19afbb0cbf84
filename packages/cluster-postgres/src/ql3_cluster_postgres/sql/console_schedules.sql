-- ConsoleReader (the web console's schedules page, and the head of one schedule's page when
-- %(schedule_id)s is given): each schedule's state and why (quarantine reason, open pause span),
-- window, next due, its latest Run's outcome (the latest attempt's state and exit code) and the
-- admission lateness p50/p99 of the cron Runs scheduled in the last hour of the DATABASE clock.
-- Each probe of ql3.runs walks the (schedule_id, scheduled_for_ms) unique index.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
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
CROSS JOIN ql3.trigger_schedules AS s
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
           percentile_disc(0.5) WITHIN GROUP (ORDER BY r.created_at_ms - r.scheduled_for_ms)
               AS p50_ms,
           percentile_disc(0.99) WITHIN GROUP (ORDER BY r.created_at_ms - r.scheduled_for_ms)
               AS p99_ms
    FROM ql3.runs AS r
    WHERE r.schedule_id = s.id
      AND r.kind = 'cron'
      AND r.scheduled_for_ms >= obs.now_ms - 3600000
) AS late ON true
WHERE (%(schedule_id)s::bigint IS NULL OR s.id = %(schedule_id)s::bigint)
ORDER BY t.name
