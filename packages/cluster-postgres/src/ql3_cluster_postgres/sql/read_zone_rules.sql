-- The zone rules version recorded for every replica (issue 10.3), if any.
SELECT z.version, z.recorded_at_ms, z.recorded_by
FROM ql3.zone_rules AS z
