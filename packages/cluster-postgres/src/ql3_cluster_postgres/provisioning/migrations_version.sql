-- The schema version: the highest applied migration number (0 with an empty ledger).
SELECT coalesce(max(version), 0) AS version FROM ql3.schema_migrations
