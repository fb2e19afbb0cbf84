-- Record one applied migration in the ledger, in the same transaction as the file itself, at the
-- database time (rule zero).
INSERT INTO ql3.schema_migrations (name, version, sha256, applied_at_ms)
VALUES (%(name)s, %(version)s, %(sha256)s,
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
