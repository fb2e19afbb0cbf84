-- Bench (worker): the attempts of Runs after `after_run_id`, by database time: how many ended
-- and how, the first start, the last end, the admission instant(s), and admission -> start
-- latencies (started_at_ms - the Run's created_at_ms) at p50 / p99 / max.
SELECT count(*) AS attempts,
       count(*) FILTER (WHERE a.state = 'succeeded') AS succeeded,
       count(*) FILTER (WHERE a.state NOT IN ('succeeded', 'queued', 'running')) AS other_ends,
       min(r.created_at_ms) AS first_admitted_ms,
       max(r.created_at_ms) AS last_admitted_ms,
       min(a.started_at_ms) AS first_started_ms,
       max(a.finished_at_ms) AS last_finished_ms,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY a.started_at_ms - r.created_at_ms)
           AS start_p50_ms,
       percentile_disc(0.99) WITHIN GROUP (ORDER BY a.started_at_ms - r.created_at_ms)
           AS start_p99_ms,
       max(a.started_at_ms - r.created_at_ms) AS start_max_ms,
       count(DISTINCT a.worker_id) AS workers
FROM ql3.attempts AS a
JOIN ql3.runs AS r ON r.id = a.run_id
WHERE r.id > %(after_run_id)s::bigint
