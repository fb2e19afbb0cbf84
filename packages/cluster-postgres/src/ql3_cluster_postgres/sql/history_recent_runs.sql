-- HistoryReader.recent_runs: the latest runs (highest id first), optionally of one schedule (its
-- task's name) and in one state, each with all its attempts in number order. A run's state is
-- its latest attempt's: a successor is queued in the statement that ends its predecessor, so a
-- final latest attempt (failed, timed_out, abandoned) means no attempt is left. Optionally of one
-- kind: `cron` (an occurrence) or `manual` (a trigger, with its request id; migration 0008).
SELECT r.id AS run_id,
       r.kind,
       r.request_id,
       r.schedule_id,
       k.name AS schedule_name,
       r.scheduled_for_ms,
       r.created_at_ms,
       latest.state,
       (
           SELECT coalesce(jsonb_agg(jsonb_build_object(
               'attempt_id', a.id,
               'attempt_number', a.attempt_number,
               'state', a.state,
               'worker_id', a.worker_id,
               'created_at_ms', a.created_at_ms,
               'eligible_at_ms', coalesce(a.not_before_ms, a.created_at_ms),
               'started_at_ms', a.started_at_ms,
               'finished_at_ms', a.finished_at_ms,
               'lease_expires_at_ms', a.lease_expires_at_ms,
               'exit_code', a.exit_code,
               'output_tail', a.output_tail
           ) ORDER BY a.attempt_number), '[]'::jsonb)
           FROM ql3.attempts AS a
           WHERE a.run_id = r.id
       ) AS attempts
FROM ql3.runs AS r
JOIN ql3.tasks AS k ON k.id = r.task_id
LEFT JOIN LATERAL (
    SELECT a.state
    FROM ql3.attempts AS a
    WHERE a.run_id = r.id
    ORDER BY a.attempt_number DESC
    LIMIT 1
) AS latest ON true
WHERE (%(schedule)s::text IS NULL OR k.name = %(schedule)s::text)
  AND (%(state)s::text IS NULL OR latest.state = %(state)s::text)
  AND (%(kind)s::text IS NULL OR r.kind = %(kind)s::text)
ORDER BY r.id DESC
LIMIT %(batch_limit)s
