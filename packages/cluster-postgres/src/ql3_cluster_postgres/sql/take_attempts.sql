-- WorkerIngress.take_attempts: take up to batch_limit queued attempts whose time has come by the
-- database clock (a first attempt once admitted, a successor from its not_before_ms), oldest
-- eligible first, and make each running under the caller's lease token until the database time
-- + lease_ms; append an attempt.running event each, in this statement. Only attempts of command
-- tasks (when `commands`) and of the Python tasks the worker registered are taken, so a worker
-- never holds work it cannot run. SKIP LOCKED lets workers take disjoint attempts without
-- waiting on each other. Times never move backwards on a row (greatest).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
picked AS (
    SELECT a.id
    FROM ql3.attempts AS a
    JOIN ql3.runs AS r ON r.id = a.run_id
    JOIN ql3.tasks AS k ON k.id = r.task_id
    CROSS JOIN obs
    WHERE a.state = 'queued'
      AND coalesce(a.not_before_ms, a.created_at_ms) <= obs.now_ms
      AND CASE
          WHEN k.command IS NULL THEN k.name = ANY (%(python_tasks)s::text[])
          ELSE %(commands)s::boolean
      END
    ORDER BY coalesce(a.not_before_ms, a.created_at_ms), a.id
    LIMIT %(batch_limit)s
    FOR UPDATE OF a SKIP LOCKED
),
taken AS (
    UPDATE ql3.attempts AS a
    SET state = 'running',
        worker_id = %(worker_id)s,
        lease_token = %(lease_token)s,
        started_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        lease_expires_at_ms = greatest(a.updated_at_ms, obs.now_ms) + %(lease_ms)s::bigint,
        updated_at_ms = greatest(a.updated_at_ms, obs.now_ms)
    FROM picked AS p CROSS JOIN obs
    WHERE a.id = p.id
    RETURNING a.id, a.run_id, a.attempt_number, a.created_at_ms, a.not_before_ms,
              a.started_at_ms, a.lease_expires_at_ms, a.worker_id
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
SELECT t.id AS attempt_id,
       t.run_id,
       r.schedule_id,
       r.task_id,
       k.name AS task_name,
       t.attempt_number,
       r.scheduled_for_ms,
       k.payload_template AS payload,
       k.command,
       k.max_attempts,
       k.timeout_ms,
       k.retry_backoff_ms,
       t.created_at_ms,
       coalesce(t.not_before_ms, t.created_at_ms) AS eligible_at_ms,
       t.started_at_ms AS taken_at_ms,
       t.lease_expires_at_ms
FROM taken AS t
JOIN ql3.runs AS r ON r.id = t.run_id
JOIN ql3.tasks AS k ON k.id = r.task_id
ORDER BY coalesce(t.not_before_ms, t.created_at_ms), t.id
