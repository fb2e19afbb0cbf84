-- DESIGN §3: one statement, one database observation. `obs` is MATERIALIZED so the database
-- clock is read exactly once; due-ness, takeover of an expired claim and never-backwards all
-- compare against it, and it is written as the acquired time (updated_at_ms) and the lease base.
-- Parameters: owner_id, claim_token, lease_ms, batch_limit, zone_rules_version. No time is ever
-- a parameter.
-- The scalar subquery makes the cursor bound an index condition on trigger_schedules_due,
-- so the scan walks only due active rows, in due order, and idle schedules cost nothing.
-- Zone rules (DESIGN §9): nothing is claimed unless the replica's zone rules version is the one
-- recorded in ql3.zone_rules, read by this very statement, so an operator's switch is atomic for
-- every replica. The result always has at least one row carrying the recorded version; claimed
-- rows follow it in the same rows (claim columns NULL when nothing was claimed).
-- The column names below are the fields of ClaimedRow (_rows.py): Python reads them by name.
-- Commit mode (DESIGN §3): this statement's own commit does not wait for the WAL flush (or a
-- synchronous standby): `set_config(..., true)` is local to its transaction, so the session's
-- next transaction, the fenced commit, is synchronous again. A claim lost by a crash is safe:
-- it only sets a lease, and nothing is admitted on its strength until the fenced commit proves
-- it (owner, token, version, acquired time and ctid all equal, DESIGN §5). A lost claim makes that
-- fence fail (raced, nothing written); and a fenced commit that is durable implies its claim is,
-- because WAL is flushed in order and the claim's record precedes the commit's. On a failover the
-- same holds on the new primary. A durable claim flush cost ~2.2 ms of every round (p50, durable
-- bench cluster, shared disk); the chaos scenario test_claim_crash crashes the server right after
-- claims and checks the history exact.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
rules AS MATERIALIZED (
    SELECT (SELECT z.version FROM ql3.zone_rules AS z) AS recorded,
           set_config('synchronous_commit', 'off', true) AS commit_mode
),
due AS (
    SELECT s.id
    FROM ql3.trigger_schedules AS s
    WHERE s.state = 'active'
      AND s.next_due_at_ms <= (SELECT now_ms FROM obs)
      AND (s.claim_expires_at_ms IS NULL OR s.claim_expires_at_ms <= (SELECT now_ms FROM obs))
      AND s.updated_at_ms <= (SELECT now_ms FROM obs)
      AND (SELECT recorded FROM rules) = %(zone_rules_version)s::text
    ORDER BY s.next_due_at_ms, s.id
    LIMIT %(batch_limit)s
    FOR UPDATE OF s SKIP LOCKED
),
claimed AS (
    UPDATE ql3.trigger_schedules AS t
    SET claim_owner_id = %(owner_id)s,
        claim_token = %(claim_token)s,
        claim_expires_at_ms = obs.now_ms + %(lease_ms)s,
        updated_at_ms = obs.now_ms,
        version = t.version + 1
    FROM obs
    -- By key, never by a join with `due`: on a small table (a few thousand rows, all due) the
    -- planner hashed `due` and read the whole primary key to probe it (4.8 of 8.3 ms at 1 000
    -- schedules, EXPLAIN ANALYZE); `= ANY` of the claimed ids is one index probe per claim
    -- whatever the table's size. The rows are already locked by `due` (same statement).
    WHERE t.id = ANY (ARRAY(SELECT due.id FROM due))
    RETURNING
        t.id, t.task_id, t.version, t.claim_owner_id, t.claim_token, t.updated_at_ms,
        t.claim_expires_at_ms, t.next_due_at_ms, t.cron, t.timezone, t.misfire_policy,
        t.misfire_grace_ms, t.start_at_ms, t.end_at_ms, t.ctid::text
)
SELECT
    rules.recorded AS recorded_zone_rules_version,
    c.id AS schedule_id,
    c.task_id,
    c.version,
    c.claim_owner_id AS owner_id,
    c.claim_token,
    c.updated_at_ms AS claim_acquired_at_ms,
    c.claim_expires_at_ms,
    c.next_due_at_ms,
    c.cron,
    c.timezone,
    c.misfire_policy,
    c.misfire_grace_ms,
    c.start_at_ms,
    c.end_at_ms,
    c.ctid
FROM rules
LEFT JOIN claimed AS c ON true
-- Due order, as `due` chose them: the Coordinator decides (and spends its budget) in this order.
ORDER BY c.next_due_at_ms, c.id
