INSERT INTO ql3.schema_migrations (name, version, sha256, applied_at_ms)
VALUES (%(name)s, %(version)s, %(sha256)s,
        floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
