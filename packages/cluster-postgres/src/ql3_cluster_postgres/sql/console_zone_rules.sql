-- ConsoleReader, replicas page: the zone rules version every replica must decide with.
SELECT z.version, z.recorded_at_ms FROM ql3.zone_rules AS z
