-- One migration runner per database at a time (key: 'ql3migr' as a number); session-level so it
-- spans the per-file transactions.
SELECT pg_advisory_lock(8255167006542066)
