-- Every cron.* setting as the server reports it (pg_cron's defaults unless the bench set one),
-- and shared_preload_libraries: the configuration a pg_cron figure was measured under.
SELECT name, setting
FROM pg_settings
WHERE starts_with(name, 'cron.') OR name = 'shared_preload_libraries'
ORDER BY name
