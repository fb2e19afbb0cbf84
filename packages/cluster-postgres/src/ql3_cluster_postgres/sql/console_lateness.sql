-- ConsoleReader, one schedule's lateness chart: its latest cron Runs (by occurrence) with how
-- late each was admitted, by the database clock (created_at_ms - scheduled_for_ms).
SELECT r.scheduled_for_ms,
       r.created_at_ms - r.scheduled_for_ms AS lateness_ms
FROM ql3.runs AS r
WHERE r.schedule_id = %(schedule_id)s::bigint AND r.kind = 'cron'
ORDER BY r.scheduled_for_ms DESC
LIMIT %(batch_limit)s
