-- The pg_cron side by side: pg_cron's extension in `cron.database_name` (the superuser's database).
CREATE EXTENSION IF NOT EXISTS pg_cron
