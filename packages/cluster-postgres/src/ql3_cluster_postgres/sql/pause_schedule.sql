-- ScheduleAdmin.pause: ql3.admin_pause_v1 (migration 0010) pauses the schedule at the database
-- time and records the span (who, when, reason, until), or returns the span already open.
SELECT p.pause_id, p.paused_at_ms, p.until_ms, p.existed
FROM ql3.admin_pause_v1(
    %(schedule)s::text, %(reason)s::text, %(until_ms)s::bigint, %(until_after_ms)s::bigint
) AS p
