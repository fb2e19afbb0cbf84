-- Bench setup only (prune, hourly with autovacuum), as the superuser on a throwaway cluster: the
-- launcher looks every second, because the simulated hours pass in seconds of real time.
ALTER SYSTEM SET autovacuum_naptime = '1s'
