-- WorkerIngress.release_attempts: a worker stopping gracefully hands back the attempts it holds
-- (its lease token) and could not finish within its grace: each goes back to queued with the
-- same attempt number, eligible at once (its not_before_ms, if any, has passed), and appends
-- attempt.released. Being stopped is not the task's failure, so no attempt is used up; the
-- command may have run in part, and the run id stays the idempotency key.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
released AS (
    UPDATE ql3.attempts AS a
    SET state = 'queued',
        worker_id = NULL,
        lease_token = NULL,
        lease_expires_at_ms = NULL,
        started_at_ms = NULL,
        updated_at_ms = greatest(a.updated_at_ms, obs.now_ms)
    FROM obs
    WHERE a.id = ANY (%(attempt_ids)s::bigint[])
      AND a.state = 'running'
      AND a.lease_token = %(lease_token)s
    RETURNING a.id, a.run_id, a.updated_at_ms
),
released_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
    SELECT r.run_id, r.id, 'attempt.released',
           jsonb_build_object('worker_id', %(worker_id)s::text), r.updated_at_ms
    FROM released AS r
    ORDER BY r.id
    RETURNING id
)
SELECT r.id AS attempt_id FROM released AS r ORDER BY r.id
