-- The installed pg_cron extension's version (the Debian package ships the library beside it).
SELECT extversion AS version FROM pg_extension WHERE extname = 'pg_cron'
