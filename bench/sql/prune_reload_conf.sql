-- Bench setup only: apply the ALTER SYSTEM just made (superuser, throwaway cluster).
SELECT pg_reload_conf() AS reloaded
