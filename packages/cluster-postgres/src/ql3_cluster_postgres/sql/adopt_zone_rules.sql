-- `ql3 zone-rules adopt`: make this node's zone rules version the recorded one, at the database
-- time. From the commit on, every claim statement compares against it.
INSERT INTO ql3.zone_rules (version, recorded_at_ms, recorded_by)
VALUES (
    %(version)s,
    floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    session_user
)
ON CONFLICT (singleton) DO UPDATE
SET version = excluded.version,
    recorded_at_ms = excluded.recorded_at_ms,
    recorded_by = excluded.recorded_by
RETURNING version, recorded_at_ms, recorded_by
