-- Adopting other zone rules: one skip record per moved schedule whose old rules had occurrences
-- due that nobody decided, reason `zone_rules_changed`, naming both versions; no claim and no
-- policy passed them. created_at_ms is this statement's clock reading, after the instant the new
-- rules took effect (every skipped occurrence is at or before it, which a CHECK holds).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
INSERT INTO ql3.skipped_occurrences (
    schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, reason, zone_rules_from,
    zone_rules_to, created_at_ms
)
SELECT k.schedule_id, k.first_ms, k.last_ms, k.skipped, 'zone_rules_changed', %(old_version)s,
       %(new_version)s, obs.now_ms
FROM unnest(
    %(schedule_ids)s::bigint[], %(first_ms)s::bigint[], %(last_ms)s::bigint[], %(counts)s::bigint[]
) AS k (schedule_id, first_ms, last_ms, skipped)
CROSS JOIN obs
