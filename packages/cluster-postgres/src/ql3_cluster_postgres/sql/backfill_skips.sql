-- ScheduleAdmin.backfill (plan): the schedule's skip records (any reason) that reach into the
-- span, in occurrence order; a backfill admits the occurrences they cover and links to them.
SELECT k.id, k.first_skipped_ms, k.last_skipped_ms, k.skipped_count, k.reason
FROM ql3.skipped_occurrences AS k
WHERE k.schedule_id = %(schedule_id)s::bigint
  AND k.last_skipped_ms >= %(from_ms)s::bigint
  AND k.first_skipped_ms <= %(to_ms)s::bigint
ORDER BY k.first_skipped_ms, k.id
