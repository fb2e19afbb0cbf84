-- ConsoleReader, one schedule's page: its Runs counted by outcome (the latest attempt's state;
-- `none` for a Run without an attempt) and by kind (cron, manual, backfill).
SELECT r.kind,
       coalesce(latest.state, 'none') AS outcome,
       count(*)::bigint AS runs
FROM ql3.runs AS r
LEFT JOIN LATERAL (
    SELECT a.state
    FROM ql3.attempts AS a
    WHERE a.run_id = r.id
    ORDER BY a.attempt_number DESC
    LIMIT 1
) AS latest ON true
WHERE r.schedule_id = %(schedule_id)s::bigint
GROUP BY r.kind, coalesce(latest.state, 'none')
ORDER BY r.kind, outcome
