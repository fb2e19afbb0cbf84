-- `ql3 zone-rules adopt`: make another zone rules version the recorded one. Its clock reading is
-- the instant the new rules take effect: recorded here, copied into the version history
-- (append_zone_rule_version.sql), and kept as the transaction-local setting ql3.placed_after_ms,
-- so the cursors this transaction places under the new rules (and the revisions it opens) start
-- strictly after that instant without the time travelling back as a parameter.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
placed AS MATERIALIZED (
    SELECT set_config('ql3.placed_after_ms', obs.now_ms::text, true) AS setting FROM obs
)
INSERT INTO ql3.zone_rules (version, recorded_at_ms, recorded_by)
SELECT %(version)s, obs.now_ms, session_user
FROM obs CROSS JOIN placed
ON CONFLICT (singleton) DO UPDATE
SET version = excluded.version,
    recorded_at_ms = excluded.recorded_at_ms,
    recorded_by = excluded.recorded_by
RETURNING version, recorded_at_ms, recorded_by
