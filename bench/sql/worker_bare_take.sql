-- The bare baseline's take (bench/_worker_child.py): the rows `ql3.worker_take_attempts_v2`
-- writes for the default overlap policy, in one statement and one transaction: up to
-- `batch_limit` due queued attempts of the task, oldest eligible first, FOR UPDATE SKIP LOCKED,
-- made running under the lease at one database observation, one `attempt.running` event each.
-- No overlap decision, no argument checks, no SECURITY DEFINER function.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
picked AS (
    SELECT a.id
    FROM ql3.attempts AS a
    WHERE a.state = 'queued'
      AND coalesce(a.not_before_ms, a.created_at_ms) <= (SELECT now_ms FROM obs)
    ORDER BY coalesce(a.not_before_ms, a.created_at_ms), a.id
    LIMIT %(batch_limit)s::integer
    FOR UPDATE OF a SKIP LOCKED
),
taken AS (
    UPDATE ql3.attempts AS a
    SET state = 'running',
        worker_id = %(worker_id)s::text,
        worker_login = session_user,
        lease_token = %(lease_token)s::uuid,
        taken_lease_token = %(lease_token)s::uuid,
        started_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        lease_expires_at_ms = greatest(a.updated_at_ms, obs.now_ms) + %(lease_ms)s::bigint,
        updated_at_ms = greatest(a.updated_at_ms, obs.now_ms)
    FROM picked AS p CROSS JOIN obs
    WHERE a.id = p.id
    RETURNING a.id, a.run_id, a.worker_id, a.started_at_ms, a.lease_expires_at_ms
),
running_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
    SELECT t.run_id, t.id, 'attempt.running',
           jsonb_build_object('worker_id', t.worker_id,
                              'lease_expires_at_ms', t.lease_expires_at_ms),
           t.started_at_ms
    FROM taken AS t
    ORDER BY t.id
    RETURNING id
)
SELECT t.id AS attempt_id, t.run_id
FROM taken AS t
ORDER BY t.id
