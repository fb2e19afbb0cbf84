-- Recording or adopting zone rules, right after ql3.zone_rules was written in this transaction:
-- the version in force until now ends at the instant the new one took effect (that row's own
-- clock reading), never before it began. Followed by append_zone_rule_version.sql.
UPDATE ql3.zone_rule_versions AS v
SET superseded_at_ms = greatest(z.recorded_at_ms, v.took_effect_at_ms)
FROM ql3.zone_rules AS z
WHERE v.superseded_at_ms IS NULL
