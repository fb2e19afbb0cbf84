-- AlertIngress.record_due_alerts (workers; the cheap check that records `missed` while every
-- Coordinator is down): ql3.record_due_alerts_v1 (migration 0013) records the `missed` and
-- `late` alerts whose bound the database clock has passed, once each, and returns them.
SELECT d.alert_id, d.kind, d.schedule_id, d.subject_key
FROM ql3.record_due_alerts_v1() AS d
