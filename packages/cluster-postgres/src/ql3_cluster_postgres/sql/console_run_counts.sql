-- ConsoleReader, one schedule's page: its latest Runs (by occurrence, at most %(window_runs)s)
-- counted by outcome (the latest attempt's state; `none` for a Run without an attempt) and by
-- kind (cron, manual, backfill). A bounded window, shown as such: the walk of the
-- (schedule_id, scheduled_for_ms) unique index stops after the window, so the page costs the
-- same whatever the schedule's history (the all-time total is console_run_total.sql).
SELECT r.kind,
       coalesce(latest.state, 'none') AS outcome,
       count(*)::bigint AS runs
FROM (
    SELECT r.id, r.kind
    FROM ql3.runs AS r
    WHERE r.schedule_id = %(schedule_id)s::bigint
    ORDER BY r.scheduled_for_ms DESC
    LIMIT %(window_runs)s
) AS r
LEFT JOIN LATERAL (
    SELECT a.state
    FROM ql3.attempts AS a
    WHERE a.run_id = r.id
    ORDER BY a.attempt_number DESC
    LIMIT 1
) AS latest ON true
GROUP BY r.kind, coalesce(latest.state, 'none')
ORDER BY r.kind, outcome
