-- verify_history: the admission lateness of each schedule's runs in scope (commit time by the
-- database clock minus the occurrence): how many, the median, the 99th percentile and the most.
SELECT r.schedule_id,
       count(*) AS runs,
       percentile_disc(0.5) WITHIN GROUP (ORDER BY r.created_at_ms - r.scheduled_for_ms) AS p50_ms,
       percentile_disc(0.99) WITHIN GROUP (ORDER BY r.created_at_ms - r.scheduled_for_ms) AS p99_ms,
       max(r.created_at_ms - r.scheduled_for_ms) AS max_ms
FROM ql3.runs AS r
WHERE r.scheduled_for_ms >= %(since_ms)s
  AND r.kind = 'cron'
GROUP BY r.schedule_id
ORDER BY r.schedule_id
