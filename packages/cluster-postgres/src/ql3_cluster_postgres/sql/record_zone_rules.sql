-- `ql3 migrate`: record the migrating node's zone rules version if none is recorded yet, at the
-- database time; an existing record is kept (switching it is `ql3 zone-rules adopt`).
INSERT INTO ql3.zone_rules (version, recorded_at_ms, recorded_by)
VALUES (
    %(version)s,
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    session_user
)
ON CONFLICT (singleton) DO NOTHING
RETURNING version, recorded_at_ms, recorded_by
