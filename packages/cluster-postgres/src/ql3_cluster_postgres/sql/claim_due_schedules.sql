-- D2: one statement, one database observation. `obs` is MATERIALIZED so the database clock is
-- read exactly once; due-ness, takeover of an expired claim and never-backwards all compare
-- against it, and it is written as the acquired time (updated_at_ms) and the lease base.
-- Parameters: owner_id, claim_token, lease_ms, batch_limit. No time is ever a parameter.
-- The scalar subquery makes the cursor bound an index condition on trigger_schedules_due,
-- so the scan walks only due active rows, in due order, and idle schedules cost nothing.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
due AS (
    SELECT s.id
    FROM ql3.trigger_schedules AS s
    WHERE s.state = 'active'
      AND s.next_due_at_ms <= (SELECT now_ms FROM obs)
      AND (s.claim_expires_at_ms IS NULL OR s.claim_expires_at_ms <= (SELECT now_ms FROM obs))
      AND s.updated_at_ms <= (SELECT now_ms FROM obs)
    ORDER BY s.next_due_at_ms, s.id
    LIMIT %(batch_limit)s
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE ql3.trigger_schedules AS t
SET claim_owner_id = %(owner_id)s,
    claim_token = %(claim_token)s,
    claim_expires_at_ms = obs.now_ms + %(lease_ms)s,
    updated_at_ms = obs.now_ms,
    version = t.version + 1
FROM due, obs
WHERE t.id = due.id
RETURNING
    t.id, t.task_id, t.version, t.claim_owner_id, t.claim_token, t.updated_at_ms,
    t.claim_expires_at_ms, t.next_due_at_ms, t.cron, t.timezone, t.misfire_policy,
    t.misfire_grace_ms, t.start_at_ms, t.end_at_ms, t.ctid::text
