-- The oracle's revisions: which definition (and zone rules version) held for which cursor span.
SELECT v.schedule_id,
       v.revision,
       v.reason,
       v.cron,
       v.timezone,
       v.misfire_policy,
       v.misfire_grace_ms,
       v.start_at_ms,
       v.end_at_ms,
       v.first_cursor_ms,
       v.end_cursor_ms,
       v.ended_at_ms,
       v.zone_rules_version
FROM ql3.schedule_revisions AS v
ORDER BY v.schedule_id, v.revision
