-- Quarantine (DESIGN §8): put each claimed schedule that cannot be read or decided in state
-- `invalid` with its reason, releasing its claim in the same write, fenced on the exact claim
-- (like release_claims). The statement's own clock_timestamp() is the quarantine time and the
-- new updated_at_ms; a row whose updated_at_ms is later (the clock went back) is left to expire
-- rather than written backwards. The cursor is kept, so `ql3 schedule resume` continues from it.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
claims AS (
    SELECT *
    FROM unnest(
        %(schedule_ids)s::bigint[], %(owner_ids)s::text[], %(claim_tokens)s::uuid[],
        %(versions)s::bigint[], %(acquired_ms)s::bigint[], %(expires_ms)s::bigint[],
        %(reasons)s::text[]
    ) AS c (schedule_id, owner_id, claim_token, version, acquired_ms, expires_ms, reason)
)
UPDATE ql3.trigger_schedules AS s
SET state = 'invalid',
    invalid_reason = c.reason,
    invalidated_at_ms = obs.now_ms,
    claim_owner_id = NULL,
    claim_token = NULL,
    claim_expires_at_ms = NULL,
    version = s.version + 1,
    updated_at_ms = obs.now_ms
FROM claims AS c, obs
WHERE s.id = c.schedule_id
  AND s.claim_owner_id = c.owner_id
  AND s.claim_token = c.claim_token
  AND s.version = c.version
  AND s.updated_at_ms = c.acquired_ms
  AND s.claim_expires_at_ms = c.expires_ms
  AND s.updated_at_ms <= obs.now_ms
-- Read by name into QuarantinedRow (_rows.py).
RETURNING s.id AS schedule_id, s.invalid_reason AS reason, s.invalidated_at_ms AS quarantined_at_ms
