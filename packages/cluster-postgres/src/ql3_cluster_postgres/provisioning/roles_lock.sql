-- Serialises concurrent provisioning within one database (key: 'ql3role' as a number).
SELECT pg_advisory_xact_lock(8255167003356268)
