-- The recorded zone rules version, which the claim statement must be given to claim anything.
SELECT version AS zone_rules_version FROM ql3.zone_rules
