-- WorkerIngress.abandon_expired_attempts: a running attempt whose lease expired by the database
-- clock (its worker died, or lost the database for longer than its lease) becomes abandoned at
-- this statement's database time, and its successor is queued while the task's max_attempts
-- allows, not before that time + the retry backoff; both events are appended here too. The
-- expiry is read again under the row lock (READ COMMITTED rechecks the WHERE), so a lease its
-- holder renewed a moment ago is left alone; SKIP LOCKED keeps several workers from waiting on
-- each other, and each expired attempt is abandoned exactly once.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
expired AS (
    SELECT a.id, a.lease_expires_at_ms
    FROM ql3.attempts AS a
    CROSS JOIN obs
    WHERE a.state = 'running' AND a.lease_expires_at_ms <= obs.now_ms
    ORDER BY a.lease_expires_at_ms, a.id
    LIMIT %(batch_limit)s
    FOR UPDATE OF a SKIP LOCKED
),
abandoned AS (
    UPDATE ql3.attempts AS a
    SET state = 'abandoned',
        finished_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        updated_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        lease_token = NULL,
        lease_expires_at_ms = NULL
    FROM expired AS x CROSS JOIN obs
    WHERE a.id = x.id
    RETURNING a.id, a.run_id, a.attempt_number, a.worker_id, a.finished_at_ms,
              x.lease_expires_at_ms AS lease_expired_at_ms
),
successor AS (
    INSERT INTO ql3.attempts (
        run_id, attempt_number, state, not_before_ms, created_at_ms, updated_at_ms
    )
    SELECT b.run_id, b.attempt_number + 1, 'queued', b.finished_at_ms + k.retry_backoff_ms,
           b.finished_at_ms, b.finished_at_ms
    FROM abandoned AS b
    JOIN ql3.runs AS r ON r.id = b.run_id
    JOIN ql3.tasks AS k ON k.id = r.task_id
    WHERE b.attempt_number < k.max_attempts
    RETURNING id, run_id, not_before_ms, created_at_ms
),
state_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
    SELECT e.run_id, e.attempt_id, e.kind, e.payload, e.created_at_ms
    FROM (
        SELECT b.run_id, b.id AS attempt_id, 1 AS position, 'attempt.abandoned' AS kind,
               jsonb_build_object('worker_id', b.worker_id,
                                  'lease_expired_at_ms', b.lease_expired_at_ms,
                                  'retried', s.id IS NOT NULL) AS payload,
               b.finished_at_ms AS created_at_ms
        FROM abandoned AS b
        LEFT JOIN successor AS s ON s.run_id = b.run_id
        UNION ALL
        SELECT s.run_id, s.id, 2, 'attempt.queued',
               jsonb_build_object('not_before_ms', s.not_before_ms,
                                  'after_attempt_id', b.id, 'after', 'abandoned'),
               s.created_at_ms
        FROM successor AS s
        JOIN abandoned AS b ON b.run_id = s.run_id
    ) AS e
    ORDER BY e.run_id, e.position
    RETURNING id
)
SELECT b.id AS attempt_id,
       b.run_id,
       b.attempt_number,
       b.worker_id,
       b.lease_expired_at_ms,
       b.finished_at_ms AS abandoned_at_ms,
       s.id AS next_attempt_id,
       s.not_before_ms AS next_not_before_ms
FROM abandoned AS b
LEFT JOIN successor AS s ON s.run_id = b.run_id
ORDER BY b.id
