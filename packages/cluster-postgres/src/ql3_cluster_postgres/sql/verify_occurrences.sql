-- verify_history: one schedule's admitted occurrences in scope, in order, one row per run (an
-- occurrence admitted twice comes twice). Read from the (schedule_id, scheduled_for_ms) index
-- alone (an index-only scan on a vacuumed table) through a server-side cursor, so ten million
-- runs stream through the checker without being held or fetched from the table. Cron runs only
-- (request_id IS NULL, also a column of that index): a manual Run fills no occurrence (0008).
SELECT r.scheduled_for_ms
FROM ql3.runs AS r
WHERE r.schedule_id = %(schedule_id)s
  AND r.request_id IS NULL
  AND r.scheduled_for_ms >= %(since_ms)s
ORDER BY r.scheduled_for_ms
