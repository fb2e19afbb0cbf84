-- WorkerIngress.finish_attempt: record how an attempt the caller holds (its lease token, still
-- running) ended: succeeded, failed or timed_out, with its exit code and output tail, at the
-- database time. An attempt that did not succeed gets its successor queued in this same
-- statement while the task's max_attempts allows, not before the database time + the task's
-- retry backoff. Each change appends its event here too (attempt.<state>, attempt.queued).
-- The predecessor leaves the live set (attempts_one_live) before its successor is inserted:
-- the successor is built from the UPDATE's output. A finish is accepted as long as nobody
-- marked the attempt abandoned, even past its lease: the work is done, and recording it beats
-- running it again; once abandoned (or released), nothing is written.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
finished AS (
    UPDATE ql3.attempts AS a
    SET state = %(state)s::text,
        exit_code = %(exit_code)s::integer,
        output_tail = %(output_tail)s::text,
        finished_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        updated_at_ms = greatest(a.updated_at_ms, obs.now_ms),
        lease_token = NULL,
        lease_expires_at_ms = NULL
    FROM obs
    WHERE a.id = %(attempt_id)s
      AND a.state = 'running'
      AND a.lease_token = %(lease_token)s
      AND %(state)s::text IN ('succeeded', 'failed', 'timed_out')
    RETURNING a.id, a.run_id, a.attempt_number, a.worker_id, a.state, a.exit_code,
              a.finished_at_ms
),
successor AS (
    INSERT INTO ql3.attempts (
        run_id, attempt_number, state, not_before_ms, created_at_ms, updated_at_ms
    )
    SELECT f.run_id, f.attempt_number + 1, 'queued', f.finished_at_ms + k.retry_backoff_ms,
           f.finished_at_ms, f.finished_at_ms
    FROM finished AS f
    JOIN ql3.runs AS r ON r.id = f.run_id
    JOIN ql3.tasks AS k ON k.id = r.task_id
    WHERE f.state <> 'succeeded' AND f.attempt_number < k.max_attempts
    RETURNING id, run_id, not_before_ms, created_at_ms
),
state_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
    SELECT e.run_id, e.attempt_id, e.kind, e.payload, e.created_at_ms
    FROM (
        SELECT 1 AS position, f.run_id, f.id AS attempt_id, 'attempt.' || f.state AS kind,
               jsonb_build_object('worker_id', f.worker_id, 'exit_code', f.exit_code,
                                  'retried', EXISTS (SELECT FROM successor)) AS payload,
               f.finished_at_ms AS created_at_ms
        FROM finished AS f
        UNION ALL
        SELECT 2, s.run_id, s.id, 'attempt.queued',
               jsonb_build_object('not_before_ms', s.not_before_ms,
                                  'after_attempt_id', (SELECT id FROM finished),
                                  'after', (SELECT state FROM finished)),
               s.created_at_ms
        FROM successor AS s
    ) AS e
    ORDER BY e.position
    RETURNING id
)
SELECT (SELECT id FROM finished) AS finished_id,
       (SELECT finished_at_ms FROM finished) AS finished_at_ms,
       (SELECT id FROM successor) AS next_attempt_id,
       (SELECT not_before_ms FROM successor) AS next_not_before_ms,
       (SELECT count(*) FROM state_events) AS events_written,
       -- The row as it was before this statement: why nothing was written, when nothing was.
       (SELECT a.state FROM ql3.attempts AS a WHERE a.id = %(attempt_id)s) AS state_found
