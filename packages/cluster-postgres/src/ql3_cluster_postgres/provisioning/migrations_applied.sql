SELECT name, version, sha256 FROM ql3.schema_migrations ORDER BY version
