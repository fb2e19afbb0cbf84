-- The zone rules versions in the order they took effect, with how many zones each one stores.
SELECT v.seq,
       v.version,
       v.took_effect_at_ms,
       v.superseded_at_ms,
       v.recorded_by,
       (SELECT count(*) FROM ql3.zone_rule_data AS d WHERE d.version = v.version) AS zones
FROM ql3.zone_rule_versions AS v
ORDER BY v.seq
