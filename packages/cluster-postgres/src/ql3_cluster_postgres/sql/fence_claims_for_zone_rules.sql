-- Adopting other zone rules: a claim taken under the old rules may still be deciding. Bumping the
-- version of every claimed row makes its commit fail the exact-claim fence (raced, nothing
-- written), as an admin change of the definition does; the claim columns stay and expire by
-- database time (the claim_window CHECK keeps updated_at_ms, the acquired time, unchanged).
UPDATE ql3.trigger_schedules AS s
SET version = s.version + 1
WHERE s.claim_token IS NOT NULL
RETURNING s.id
