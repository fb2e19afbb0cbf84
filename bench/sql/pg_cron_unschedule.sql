-- Remove the bench's jobs so no minute after the measured ones starts any.
SELECT count(cron.unschedule(jobid)) AS unscheduled
FROM cron.job
WHERE starts_with(jobname, 'bench-')
