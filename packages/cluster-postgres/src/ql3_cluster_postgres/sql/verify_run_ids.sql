-- verify_history: the ids of one schedule's runs of one occurrence, oldest first, to name them in
-- a finding (verify_occurrences.sql streams occurrences only).
SELECT r.id
FROM ql3.runs AS r
WHERE r.schedule_id = %(schedule_id)s AND r.scheduled_for_ms = %(scheduled_for_ms)s
  AND r.request_id IS NULL
ORDER BY r.id
