-- Bare-SQL baseline, step 1 of 2 (READ COMMITTED, autocommit): claim up to `batch` due
-- schedules in one statement that observes the database clock once. Like QL3's claim, its commit
-- does not wait for the WAL flush (the fenced commit proves the claim; DESIGN §3).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms,
           set_config('synchronous_commit', 'off', true) AS commit_mode
),
due AS (
    SELECT s.id
    FROM ql3.trigger_schedules AS s, obs
    WHERE s.state = 'active'
      AND s.next_due_at_ms <= obs.now_ms
      AND s.updated_at_ms <= obs.now_ms
      AND (s.claim_expires_at_ms IS NULL OR s.claim_expires_at_ms <= obs.now_ms)
    ORDER BY s.next_due_at_ms, s.id
    LIMIT %(batch)s
    FOR UPDATE OF s SKIP LOCKED
)
UPDATE ql3.trigger_schedules AS s
SET claim_owner_id = %(owner)s,
    claim_token = %(token)s,
    claim_expires_at_ms = obs.now_ms + %(lease_ms)s,
    updated_at_ms = obs.now_ms,
    version = s.version + 1
FROM due, obs
WHERE s.id = due.id
RETURNING s.id
