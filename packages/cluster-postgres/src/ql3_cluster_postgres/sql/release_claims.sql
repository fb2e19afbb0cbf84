-- Graceful stop, and a commit that raced (DESIGN §5): clear claims whose grant still stands, at
-- database time. The grant is owner, token, acquired time and expiry (`same_grant`), not the
-- version: an admin change, a pause or a zone rules adopt bumps the version of a claimed row and
-- leaves its claim, which only its holder clears; a release writes no decision, so the version
-- that guards decisions does not guard it. A row whose updated_at_ms is later than the
-- observation (the clock went back) is left to expire rather than written backwards. Others are
-- woken through ql3_schedule_changed, inside the transaction.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
claims AS (
    SELECT *
    FROM unnest(
        %(schedule_ids)s::bigint[], %(owner_ids)s::text[], %(claim_tokens)s::uuid[],
        %(acquired_ms)s::bigint[], %(expires_ms)s::bigint[]
    ) AS c (schedule_id, owner_id, claim_token, acquired_ms, expires_ms)
),
released AS (
    UPDATE ql3.trigger_schedules AS s
    SET claim_owner_id = NULL,
        claim_token = NULL,
        claim_expires_at_ms = NULL,
        version = s.version + 1,
        updated_at_ms = obs.now_ms
    FROM claims AS c, obs
    WHERE s.id = c.schedule_id
      AND s.claim_owner_id = c.owner_id
      AND s.claim_token = c.claim_token
      AND s.updated_at_ms = c.acquired_ms
      AND s.claim_expires_at_ms = c.expires_ms
      AND s.updated_at_ms <= obs.now_ms
    RETURNING s.id
),
notified AS (
    SELECT pg_notify('ql3_schedule_changed', 'released')
    FROM (SELECT FROM released LIMIT 1) AS any_released
)
SELECT (SELECT count(*) FROM released) AS released, (SELECT count(*) FROM notified) AS notified
