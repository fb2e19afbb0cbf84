-- `_missed.record_missed`: the missed occurrences computed for one overdue schedule, recorded once
-- each by ql3.record_missed_alerts_v1 (migration 0013) after it re-checked them under the
-- database clock (cursor unmoved, no live claim, same zone rules, each past its bound).
SELECT m.alert_id, m.kind, m.schedule_id, m.subject_key
FROM ql3.record_missed_alerts_v1(
    %(schedule_id)s, %(cursor_ms)s, %(zone_rules_version)s, %(occurrences)s::bigint[]
) AS m
