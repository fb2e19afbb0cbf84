-- verify_history: the skip records in scope (ranges ending at or after since_ms), per schedule in
-- occurrence order.
SELECT k.id,
       k.schedule_id,
       k.first_skipped_ms,
       k.last_skipped_ms,
       k.skipped_count,
       k.misfire_policy,
       k.claim_acquired_at_ms,
       k.created_at_ms
FROM ql3.skipped_occurrences AS k
WHERE %(since_ms)s::bigint IS NULL OR k.last_skipped_ms >= %(since_ms)s::bigint
ORDER BY k.schedule_id, k.first_skipped_ms, k.id
