-- ConsoleReader, workers page: the attempts running now, with the worker holding each and when
-- its lease expires (walks the attempts_running_lease partial index).
SELECT a.id AS attempt_id,
       a.run_id,
       a.attempt_number,
       t.name,
       r.schedule_id,
       r.scheduled_for_ms,
       a.worker_id,
       a.worker_login,
       a.started_at_ms,
       a.lease_expires_at_ms
FROM ql3.attempts AS a
JOIN ql3.runs AS r ON r.id = a.run_id
JOIN ql3.tasks AS t ON t.id = r.task_id
WHERE a.state = 'running'
ORDER BY a.lease_expires_at_ms, a.id
LIMIT %(batch_limit)s
