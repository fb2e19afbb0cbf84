-- Bench (worker): attempts not yet ended (queued or running), of every task.
SELECT count(*) FILTER (WHERE state = 'queued') AS queued,
       count(*) FILTER (WHERE state = 'running') AS running
FROM ql3.attempts
WHERE state IN ('queued', 'running')
