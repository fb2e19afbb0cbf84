-- Release the session advisory lock of migrations_lock.sql (same key: 'ql3migr' as a number).
SELECT pg_advisory_unlock(8255167006542066)
