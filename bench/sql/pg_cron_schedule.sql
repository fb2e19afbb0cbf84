-- `jobs` pg_cron jobs `* * * * *` (every minute, pg_cron's finest granularity in 1.4), each
-- inserting one row stamped with clock_timestamp(); they run as the superuser in this database.
SELECT count(
    cron.schedule(
        'bench-' || i,
        '* * * * *',
        'INSERT INTO public.pg_cron_hits (job, at) VALUES (' || i || ', clock_timestamp())'
    )
) AS scheduled
FROM generate_series(1, %(jobs)s) AS i
