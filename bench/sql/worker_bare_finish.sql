-- The bare baseline's finish (bench/_worker_child.py): the rows `ql3.worker_finish_attempt_v1`
-- writes for a success, in one statement and one transaction: the attempt ends `succeeded`
-- under its lease token at one database observation, with its `attempt.succeeded` event.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
finished AS (
    UPDATE ql3.attempts AS a
    SET state = 'succeeded',
        exit_code = NULL,
        output_tail = NULL,
        finished_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        updated_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        lease_token = NULL,
        lease_expires_at_ms = NULL
    FROM obs
    WHERE a.id = %(attempt_id)s::bigint
      AND (a.state = 'running') IS TRUE  -- as QL3's finish: by primary key (migration 0016)
      AND a.lease_token = %(lease_token)s::uuid
      AND a.worker_login = session_user
    RETURNING a.id, a.run_id, a.worker_id, a.finished_at_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
SELECT f.run_id, f.id, 'attempt.succeeded',
       jsonb_build_object('worker_id', f.worker_id, 'exit_code', NULL, 'retried', false),
       f.finished_at_ms
FROM finished AS f
RETURNING attempt_id
