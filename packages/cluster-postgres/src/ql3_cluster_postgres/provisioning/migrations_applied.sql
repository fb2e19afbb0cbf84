-- The migration ledger: what was applied, with the sha256 each file had then (a changed file is
-- refused as tampered before anything more is applied).
SELECT name, version, sha256 FROM ql3.schema_migrations ORDER BY version
