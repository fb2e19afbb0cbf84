-- Bench (prune): bytes of WAL between two positions read by prune_wal_lsn.sql.
SELECT pg_wal_lsn_diff(%(after)s::pg_lsn, %(before)s::pg_lsn)::bigint AS wal_bytes
