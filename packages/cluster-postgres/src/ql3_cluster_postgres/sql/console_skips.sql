-- ConsoleReader, one schedule's page: its latest skip records (newest first) with their reason
-- (misfire, overlap, paused, zone rules changed) and the occurrences each accounts for.
SELECT k.id AS skip_id,
       k.reason,
       k.misfire_policy,
       k.first_skipped_ms,
       k.last_skipped_ms,
       k.skipped_count,
       k.owner_id,
       k.created_at_ms
FROM ql3.skipped_occurrences AS k
WHERE k.schedule_id = %(schedule_id)s::bigint
ORDER BY k.first_skipped_ms DESC, k.id DESC
LIMIT %(batch_limit)s
