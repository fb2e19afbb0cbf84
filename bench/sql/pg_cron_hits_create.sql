-- What each pg_cron job writes: one row per run, stamped by the database clock when its INSERT
-- runs (the job's start, as its SQL sees it).
CREATE TABLE IF NOT EXISTS public.pg_cron_hits (
    job integer NOT NULL,
    at timestamptz NOT NULL
)
