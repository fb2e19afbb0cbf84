-- Adopting zone rules: lock the recorded version for the rest of the transaction, so two
-- operators switching at once take turns and each sees what it replaces.
SELECT z.version, z.recorded_at_ms, z.recorded_by
FROM ql3.zone_rules AS z
FOR UPDATE
