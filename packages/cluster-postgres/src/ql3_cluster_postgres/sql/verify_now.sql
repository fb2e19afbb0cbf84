-- verify_history: the database clock, sampled once for the whole check (rule zero), and the
-- zone rules version recorded in the same snapshot.
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms,
       (SELECT z.version FROM ql3.zone_rules AS z) AS zone_rules_version
