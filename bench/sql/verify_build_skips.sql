-- Bench setup only (verify), run as the database superuser: the skip records a fire_once commit
-- would have written for the synthetic history's gaps (one row per input element).
INSERT INTO ql3.skipped_occurrences (
    schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, misfire_policy,
    claim_acquired_at_ms, owner_id, claim_token, created_at_ms
)
SELECT s.schedule_id, s.first_ms, s.last_ms, s.skipped, 'fire_once', s.claim_ms, 'bench-verify',
       '00000000-0000-4000-8000-000000000001'::uuid, s.claim_ms + 5
FROM unnest(
    %(schedule_ids)s::bigint[], %(first_ms)s::bigint[], %(last_ms)s::bigint[],
    %(skipped)s::bigint[], %(claim_ms)s::bigint[]
) AS s (schedule_id, first_ms, last_ms, skipped, claim_ms)
