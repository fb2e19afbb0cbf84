-- verify_history (rule `alert`, migration 0013): a condition past its bound without its alert,
-- for a schedule that asked for that kind (since it asked: alert_watermarks.since_ms), one row
-- per violation (problem, schedule_id, alert_id NULL, kind, subject_key, at_ms): a Run
-- exhausted, a pause after failures, a Run judged late (up to the `late` watermark), a cron Run
-- or misfire skip record written after its occurrence's bound while the decision before it was
-- written by that bound (the cursor sat on it past its bound; occurrences a pause held are not
-- missed).
WITH margin AS MATERIALIZED (SELECT ql3.alert_missed_margin_ms() AS ms),
watched AS (
    SELECT w.schedule_id, w.kind, w.since_ms, w.checked_ms, s.alert_deadline_ms,
           s.misfire_grace_ms, s.created_at_ms
    FROM ql3.alert_watermarks AS w
    JOIN ql3.trigger_schedules AS s ON s.id = w.schedule_id
    WHERE w.kind = ANY (s.alert_on)
),
exhausted AS (
    SELECT r.schedule_id, r.id AS run_id, max(a.finished_at_ms) AS at_ms
    FROM ql3.runs AS r
    JOIN ql3.tasks AS k ON k.id = r.task_id
    JOIN ql3.attempts AS a ON a.run_id = r.id
    WHERE a.state IN ('failed', 'timed_out', 'abandoned') AND a.attempt_number >= k.max_attempts
      AND r.schedule_id IN (SELECT schedule_id FROM watched WHERE kind = 'failed')
    GROUP BY r.schedule_id, r.id
),
decisions AS (
    SELECT d.schedule_id, d.occurrence_ms, d.created_at_ms,
           lag(d.created_at_ms) OVER (PARTITION BY d.schedule_id
                                      ORDER BY d.occurrence_ms, d.created_at_ms) AS previous_ms
    FROM (
        SELECT r.schedule_id, r.scheduled_for_ms AS occurrence_ms, r.created_at_ms
        FROM ql3.runs AS r
        WHERE r.kind = 'cron'
          AND r.schedule_id IN (SELECT schedule_id FROM watched WHERE kind = 'missed')
        UNION ALL
        SELECT k.schedule_id, k.first_skipped_ms, k.created_at_ms
        FROM ql3.skipped_occurrences AS k
        WHERE k.reason = 'misfire'
          AND k.schedule_id IN (SELECT schedule_id FROM watched WHERE kind = 'missed')
    ) AS d
)
SELECT 'failed_missing' AS problem, e.schedule_id, NULL::bigint AS alert_id, 'failed' AS kind,
       e.run_id AS subject_key, e.at_ms
FROM exhausted AS e
JOIN watched AS w ON w.schedule_id = e.schedule_id AND w.kind = 'failed'
WHERE e.at_ms >= w.since_ms
  AND NOT EXISTS (SELECT 1 FROM ql3.alerts AS a
                  WHERE a.schedule_id = e.schedule_id AND a.kind = 'failed'
                    AND a.subject_key = e.run_id)
UNION ALL
SELECT 'paused_missing', p.schedule_id, NULL, 'paused', p.id, p.paused_at_ms
FROM ql3.schedule_pauses AS p
JOIN watched AS w ON w.schedule_id = p.schedule_id AND w.kind = 'paused'
WHERE p.cause = 'failures' AND p.paused_at_ms >= w.since_ms
  AND NOT EXISTS (SELECT 1 FROM ql3.alerts AS a
                  WHERE a.schedule_id = p.schedule_id AND a.kind = 'paused'
                    AND a.subject_key = p.id)
UNION ALL
SELECT 'late_missing', r.schedule_id, NULL, 'late', r.id, r.scheduled_for_ms
FROM watched AS w
JOIN ql3.runs AS r ON r.schedule_id = w.schedule_id
WHERE w.kind = 'late'
  AND r.scheduled_for_ms >= w.since_ms AND r.scheduled_for_ms <= w.checked_ms
  AND NOT EXISTS (SELECT 1 FROM ql3.attempts AS t
                  WHERE t.run_id = r.id AND t.state = 'succeeded'
                    AND t.finished_at_ms <= r.scheduled_for_ms + w.alert_deadline_ms)
  AND NOT EXISTS (SELECT 1 FROM ql3.alerts AS a
                  WHERE a.schedule_id = r.schedule_id AND a.kind = 'late'
                    AND a.subject_key = r.id)
UNION ALL
SELECT 'missed_missing', d.schedule_id, NULL, 'missed', d.occurrence_ms, d.created_at_ms
FROM decisions AS d
JOIN watched AS w ON w.schedule_id = d.schedule_id AND w.kind = 'missed'
CROSS JOIN margin AS m
WHERE d.occurrence_ms >= w.since_ms
  AND coalesce(d.previous_ms, w.created_at_ms) <= d.occurrence_ms + m.ms + w.misfire_grace_ms
  AND d.created_at_ms > d.occurrence_ms + m.ms + w.misfire_grace_ms
  AND NOT EXISTS (SELECT 1 FROM ql3.schedule_pauses AS p
                  WHERE p.schedule_id = d.schedule_id
                    AND d.occurrence_ms >= least(coalesce(p.first_held_ms, p.paused_at_ms),
                                                 p.paused_at_ms)
                    AND (p.end_ms IS NULL OR d.occurrence_ms <= p.end_ms))
  AND NOT EXISTS (SELECT 1 FROM ql3.alerts AS a
                  WHERE a.schedule_id = d.schedule_id AND a.kind = 'missed'
                    AND a.subject_key = d.occurrence_ms)
ORDER BY 2, 1, 5
