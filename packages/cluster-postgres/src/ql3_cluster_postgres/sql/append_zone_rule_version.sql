-- Recording or adopting zone rules: the version just written to ql3.zone_rules takes effect at
-- the instant that statement read the database clock, by the login that wrote it (a copy of the
-- row, so no time travels as a parameter). Run after supersede_zone_rule_version.sql.
INSERT INTO ql3.zone_rule_versions (version, took_effect_at_ms, recorded_by)
SELECT z.version, z.recorded_at_ms, z.recorded_by
FROM ql3.zone_rules AS z
RETURNING seq, version, took_effect_at_ms, superseded_at_ms, recorded_by
