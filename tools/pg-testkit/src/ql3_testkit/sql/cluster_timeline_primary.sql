-- The timeline of a writable server: the first 8 hex digits of the current WAL file name.
SELECT pg_walfile_name(pg_current_wal_lsn()) AS wal_file
