-- The messages of failed pg_cron runs (say, a login refused), the most frequent first.
SELECT return_message AS message, count(*) AS runs
FROM cron.job_run_details
WHERE status = 'failed'
GROUP BY return_message
ORDER BY runs DESC
LIMIT 3
