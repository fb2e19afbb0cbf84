-- ScheduleAdmin.backfill (plan): the schedule's revisions in order, each with the definition and
-- the zone rules version its occurrences were computed with (migrations 0004, 0006): an
-- occurrence is computed with the revision that was live for it, never with today's definition.
SELECT v.revision, v.cron, v.timezone, v.start_at_ms, v.end_at_ms, v.first_cursor_ms,
       v.end_cursor_ms, v.zone_rules_version
FROM ql3.schedule_revisions AS v
WHERE v.schedule_id = %(schedule_id)s::bigint
ORDER BY v.revision
