-- WAL flushes (wal_sync), writes and bytes of the whole cluster, and commits of all databases:
-- read before and after a window, the deltas are what the workers cost the disk.
SELECT
    w.wal_sync,
    w.wal_write,
    w.wal_bytes::bigint AS wal_bytes,
    (SELECT sum(d.xact_commit)::bigint FROM pg_stat_database AS d) AS xact_commit
FROM pg_stat_wal AS w
