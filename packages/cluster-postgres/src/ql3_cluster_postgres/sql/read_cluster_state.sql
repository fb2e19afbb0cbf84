-- The service's periodic look at the cluster (DESIGN §8, §9): the zone rules version recorded
-- for every replica and how many schedules are quarantined (state `invalid`, a partial index).
SELECT
    (SELECT z.version FROM ql3.zone_rules AS z) AS zone_rules_version,
    (SELECT count(*) FROM ql3.trigger_schedules AS s WHERE s.state = 'invalid') AS invalid
