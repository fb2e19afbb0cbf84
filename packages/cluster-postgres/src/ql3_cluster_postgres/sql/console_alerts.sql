-- ConsoleReader, alerts page: the latest alerts (schema 13), each row as JSON: what it is, when
-- the database raised it and where its delivery stands (never its lease token, command or
-- webhook, which the observer may not read).
SELECT to_jsonb(x) AS alert
FROM (
    SELECT a.id, a.schedule_id, a.kind, a.subject_key, a.run_id, a.pause_id, a.occurrence_ms,
           a.raised_at_ms, a.raised_by, a.delivery_state, a.delivery_attempts, a.delivered_at_ms
    FROM ql3.alerts AS a
    ORDER BY a.id DESC
    LIMIT %(batch_limit)s
) AS x
