-- verify_history: skip records in scope that belong to no schedule, per schedule id.
SELECT k.schedule_id, count(*) AS skip_records, min(k.id) AS first_id, max(k.id) AS last_id
FROM ql3.skipped_occurrences AS k
WHERE k.last_skipped_ms >= %(since_ms)s
  AND NOT EXISTS (SELECT FROM ql3.trigger_schedules AS s WHERE s.id = k.schedule_id)
GROUP BY k.schedule_id
ORDER BY k.schedule_id
