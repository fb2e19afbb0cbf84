-- ScheduleAdmin and adopting zone rules: open a revision per created or changed schedule,
-- snapshotting the definition as this transaction just wrote it on the schedule row, and the zone
-- rules version its occurrences are computed with (the recorded one, which this transaction holds
-- locked). A 'created', 'replaced' or 'zone_rules' revision records the time its cursor was
-- placed after (ql3.placed_after_ms, set by placement_now_ms.sql or adopt_zone_rules.sql in this
-- transaction; the CHECK refuses the row if it is missing). Numbers follow the schedule's last.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
input AS (
    SELECT *
    FROM unnest(%(schedule_ids)s::bigint[], %(reasons)s::text[], %(first_cursors)s::bigint[])
        AS i (schedule_id, reason, first_cursor_ms)
)
INSERT INTO ql3.schedule_revisions (
    schedule_id, revision, reason, cron, timezone, misfire_policy, misfire_grace_ms, start_at_ms,
    end_at_ms, first_cursor_ms, placed_after_ms, created_at_ms, zone_rules_version
)
SELECT s.id,
       coalesce(
           (SELECT max(v.revision) FROM ql3.schedule_revisions AS v WHERE v.schedule_id = s.id), 0
       ) + 1,
       i.reason, s.cron, s.timezone, s.misfire_policy, s.misfire_grace_ms, s.start_at_ms,
       s.end_at_ms, i.first_cursor_ms,
       CASE
           WHEN i.reason IN ('created', 'replaced', 'zone_rules')
               THEN nullif(current_setting('ql3.placed_after_ms', true), '')::bigint
       END,
       obs.now_ms,
       (SELECT z.version FROM ql3.zone_rules AS z)
FROM input AS i
JOIN ql3.trigger_schedules AS s ON s.id = i.schedule_id
CROSS JOIN obs
