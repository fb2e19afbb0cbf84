-- The oracle's skip records (DESIGN §7): the range, its count, why, and the claim that passed it.
-- Records of reason overlap are not occurrence accounting: their occurrence has a Run (one the
-- take skipped, never executed), which accounts for it; the product's `overlap` rule judges them.
SELECT k.id,
       k.schedule_id,
       k.first_skipped_ms,
       k.last_skipped_ms,
       k.skipped_count,
       k.reason,
       k.misfire_policy,
       k.claim_acquired_at_ms
FROM ql3.skipped_occurrences AS k
WHERE (%(since_ms)s::bigint IS NULL OR k.last_skipped_ms >= %(since_ms)s::bigint)
  AND k.reason <> 'overlap'
ORDER BY k.schedule_id, k.first_skipped_ms, k.id
