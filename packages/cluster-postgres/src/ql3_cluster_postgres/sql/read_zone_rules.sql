-- The zone rules version recorded for every replica (DESIGN §9), if any.
SELECT z.version, z.recorded_at_ms, z.recorded_by
FROM ql3.zone_rules AS z
