-- ConsoleReader, one schedule's page: its latest Runs (by occurrence, newest first) with every
-- attempt and the last 400 characters of each attempt's output.
SELECT r.id AS run_id,
       r.kind,
       r.scheduled_for_ms,
       r.created_at_ms,
       r.owner_id,
       a.id AS attempt_id,
       a.attempt_number,
       a.state,
       a.worker_id,
       a.started_at_ms,
       a.finished_at_ms,
       a.exit_code,
       right(a.output_tail, 400) AS output_tail
FROM (
    SELECT r.id, r.kind, r.scheduled_for_ms, r.created_at_ms, r.owner_id
    FROM ql3.runs AS r
    WHERE r.schedule_id = %(schedule_id)s::bigint
    ORDER BY r.scheduled_for_ms DESC
    LIMIT %(batch_limit)s
) AS r
LEFT JOIN ql3.attempts AS a ON a.run_id = r.id
ORDER BY r.scheduled_for_ms DESC, a.attempt_number
