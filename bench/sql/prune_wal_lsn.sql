-- Bench (prune): the WAL insert position, read before and after pruning; the difference
-- (prune_wal_bytes.sql) is the WAL the prune wrote.
SELECT pg_current_wal_lsn()::text AS lsn
