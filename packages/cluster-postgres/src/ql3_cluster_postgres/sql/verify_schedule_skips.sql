-- verify_history: one schedule's skip records in scope (ranges ending at or after since_ms), in
-- occurrence order, read by name into `Skip` (verify/_records.py), with their reason (misfire,
-- or zone_rules_changed naming both versions). Records of reason overlap are left out: their
-- occurrence has a Run (that never executed), which accounts for it once; rule `overlap` judges
-- them (verify_overlap.sql).
SELECT k.id,
       k.schedule_id,
       k.first_skipped_ms,
       k.last_skipped_ms,
       k.skipped_count,
       k.reason,
       k.misfire_policy,
       k.claim_acquired_at_ms,
       k.zone_rules_from,
       k.zone_rules_to,
       k.created_at_ms
FROM ql3.skipped_occurrences AS k
WHERE k.schedule_id = %(schedule_id)s
  AND k.last_skipped_ms >= %(since_ms)s
  AND k.reason <> 'overlap'
ORDER BY k.first_skipped_ms, k.last_skipped_ms, k.id
