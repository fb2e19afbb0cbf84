-- WorkerIngress.take_attempts: ql3.worker_take_attempts_v2 (migration 0009) takes up to
-- batch_limit eligible queued attempts by the database clock, oldest eligible first, only of
-- the tasks this worker can run, under the caller's lease token and login; attempt.running each.
-- It decides each task's overlap policy there, under a per-schedule advisory lock: an attempt
-- may instead be skipped, cancel an older one, or wait (stay queued); only taken ones come back.
-- A manual Run's own payload (migration 0008) replaces the task's template it returns; a cron
-- Run has none (runs.payload is NULL), so it gets the template as before. The payload is read
-- by the Run's primary key, one row per taken attempt: the planner sees the function's
-- rows only as an estimate (1 000) and, as a join, would hash the whole runs table on every take.
SELECT t.attempt_id, t.run_id, t.schedule_id, t.task_id, t.task_name, t.attempt_number,
       t.scheduled_for_ms,
       coalesce((SELECT r.payload FROM ql3.runs AS r WHERE r.id = t.run_id), t.payload) AS payload,
       t.command, t.max_attempts,
       t.timeout_ms, t.retry_backoff_ms, t.created_at_ms, t.eligible_at_ms, t.taken_at_ms,
       t.lease_expires_at_ms
FROM ql3.worker_take_attempts_v2(
    %(worker_id)s::text, %(lease_token)s::uuid, %(lease_ms)s::bigint, %(batch_limit)s::integer,
    %(python_tasks)s::text[], %(commands)s::boolean
) AS t
