-- The due-alerts probe (workers each poll, Coordinators when idle; the cheap check that records
-- `missed` while every Coordinator is down): ql3.record_due_alerts_v1 (migration 0013) records the
-- `missed` alert of each overdue schedule's cursor and the `late` alerts whose bound the database
-- clock has passed, once each, and returns them; kind 'overdue' rows (alert_id NULL) carry what
-- `_missed.record_missed` needs to compute the schedule's other missed occurrences.
SELECT d.alert_id, d.kind, d.schedule_id, d.subject_key, d.cursor_ms, d.after_ms, d.bound_ms,
       d.cron, d.timezone, d.misfire_policy, d.misfire_grace_ms, d.start_at_ms, d.end_at_ms,
       d.zone_rules_version
FROM ql3.record_due_alerts_v1() AS d
