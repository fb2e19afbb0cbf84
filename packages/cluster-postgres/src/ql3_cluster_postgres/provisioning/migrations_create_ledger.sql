-- DESIGN §12 migrations ledger: one row per applied file; applied_at_ms from the database clock.
CREATE TABLE IF NOT EXISTS ql3.schema_migrations (
    name          text    PRIMARY KEY,
    version       integer NOT NULL UNIQUE,
    sha256        text    NOT NULL,
    applied_at_ms bigint  NOT NULL,
    CONSTRAINT schema_migrations_sha256 CHECK (sha256 ~ '^[0-9a-f]{64}$')
);
-- Every working role checks the schema version at start-up.
GRANT SELECT ON ql3.schema_migrations TO ql3_admin, ql3_runtime, ql3_worker_ingress;
