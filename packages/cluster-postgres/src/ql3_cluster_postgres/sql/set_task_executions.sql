-- ScheduleAdmin: set what each given task runs and how, in the admin transaction that creates
-- or changes its schedule. Queued attempts read the task when a worker takes them, so a change
-- applies to every attempt that has not started yet; the overlap policy and cap (migration 0009)
-- likewise govern every take from the commit on. The schedule row is not touched.
UPDATE ql3.tasks AS t
SET command = i.command,
    max_attempts = i.max_attempts,
    timeout_ms = i.timeout_ms,
    retry_backoff_ms = i.retry_backoff_ms,
    overlap = i.overlap,
    max_running = i.max_running
FROM unnest(
    %(task_ids)s::bigint[], %(commands)s::text[], %(max_attempts)s::integer[],
    %(timeouts_ms)s::bigint[], %(retry_backoffs_ms)s::bigint[], %(overlaps)s::text[],
    %(max_runnings)s::integer[]
) AS i (task_id, command, max_attempts, timeout_ms, retry_backoff_ms, overlap, max_running)
WHERE t.id = i.task_id
