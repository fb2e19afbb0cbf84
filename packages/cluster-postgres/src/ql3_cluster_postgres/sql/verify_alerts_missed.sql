-- verify_history (rule `alert`, migration 0013): every `missed` alert (schedule_id, alert_id,
-- occurrence_ms), by schedule and occurrence, for `_alerts.check_missed_occurrences` to judge
-- with the cron engine against the schedule's revisions: each must name an occurrence of the
-- definition in force at that instant (SQL cannot compute one).
SELECT a.schedule_id, a.id AS alert_id, a.occurrence_ms
FROM ql3.alerts AS a
WHERE a.kind = 'missed'
ORDER BY a.schedule_id, a.occurrence_ms, a.id
