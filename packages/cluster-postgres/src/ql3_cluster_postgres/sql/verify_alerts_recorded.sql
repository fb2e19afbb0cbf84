-- verify_history (rule `alert`, migration 0013): the alerts recorded against their definition,
-- one row per violation (problem, schedule_id, alert_id, kind, subject_key, at_ms): the same
-- alert twice; a `missed` alert raised before its occurrence's bound (due +
-- ql3.alert_missed_margin_ms() + grace) or for an occurrence a Run or skip record had decided
-- before it was raised; a `late` one raised before its deadline or for a Run that succeeded by
-- it; a `failed` one for a Run whose attempts were not exhausted; a `paused` one for no pause
-- after failures.
WITH margin AS MATERIALIZED (SELECT ql3.alert_missed_margin_ms() AS ms)
SELECT 'duplicate' AS problem, a.schedule_id, min(a.id) AS alert_id, a.kind, a.subject_key,
       count(*) AS at_ms
FROM ql3.alerts AS a
GROUP BY a.schedule_id, a.kind, a.subject_key
HAVING count(*) > 1
UNION ALL
SELECT 'missed_without_condition', a.schedule_id, a.id, a.kind, a.subject_key, a.raised_at_ms
FROM ql3.alerts AS a
JOIN ql3.trigger_schedules AS s ON s.id = a.schedule_id
CROSS JOIN margin AS m
WHERE a.kind = 'missed'
  AND (a.raised_at_ms <= a.occurrence_ms + m.ms + s.misfire_grace_ms
       OR EXISTS (SELECT 1 FROM ql3.runs AS r
                  WHERE r.schedule_id = a.schedule_id AND r.scheduled_for_ms = a.occurrence_ms
                    AND r.request_id IS NULL AND r.created_at_ms < a.raised_at_ms)
       OR EXISTS (SELECT 1 FROM ql3.skipped_occurrences AS k
                  WHERE k.schedule_id = a.schedule_id
                    AND a.occurrence_ms BETWEEN k.first_skipped_ms AND k.last_skipped_ms
                    AND k.created_at_ms < a.raised_at_ms))
UNION ALL
SELECT 'late_without_condition', a.schedule_id, a.id, a.kind, a.subject_key, a.raised_at_ms
FROM ql3.alerts AS a
JOIN ql3.runs AS r ON r.id = a.run_id
WHERE a.kind = 'late'
  AND (a.raised_at_ms < (a.detail ->> 'deadline_ms')::bigint
       OR EXISTS (SELECT 1 FROM ql3.attempts AS t
                  WHERE t.run_id = r.id AND t.state = 'succeeded'
                    AND t.finished_at_ms <= (a.detail ->> 'deadline_ms')::bigint))
UNION ALL
SELECT 'failed_without_condition', a.schedule_id, a.id, a.kind, a.subject_key, a.raised_at_ms
FROM ql3.alerts AS a
WHERE a.kind = 'failed'
  AND NOT EXISTS (SELECT 1
                  FROM ql3.runs AS r
                  JOIN ql3.tasks AS k ON k.id = r.task_id
                  JOIN ql3.attempts AS t ON t.run_id = r.id
                  WHERE r.id = a.run_id AND r.schedule_id = a.schedule_id
                    AND t.state IN ('failed', 'timed_out', 'abandoned')
                    AND t.attempt_number >= k.max_attempts
                    AND t.finished_at_ms <= a.raised_at_ms)
UNION ALL
SELECT 'paused_without_condition', a.schedule_id, a.id, a.kind, a.subject_key, a.raised_at_ms
FROM ql3.alerts AS a
WHERE a.kind = 'paused'
  AND NOT EXISTS (SELECT 1 FROM ql3.schedule_pauses AS p
                  WHERE p.id = a.pause_id AND p.schedule_id = a.schedule_id
                    AND p.cause = 'failures')
ORDER BY 2, 1, 5
