-- Progress of one minute (`minute_ms`, epoch ms of the database clock): jobs whose row landed in
-- it, and job runs pg_cron has not finished yet (any minute).
SELECT
    (SELECT count(DISTINCT job) FROM public.pg_cron_hits
      WHERE at >= to_timestamp(%(minute_ms)s / 1000.0)
        AND at < to_timestamp((%(minute_ms)s + 60000) / 1000.0)) AS ran,
    (SELECT count(*) FROM cron.job_run_details
      WHERE status NOT IN ('succeeded', 'failed')) AS unfinished
