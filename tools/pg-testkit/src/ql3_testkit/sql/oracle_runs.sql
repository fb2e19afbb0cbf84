-- The oracle's runs with the admission shape of each (DESIGN §5): its first attempts, its
-- run.admitted events, its attempt.queued events against its attempts, and how many of those
-- were not written at the run's commit time. Runs before since_ms (NULL: none) are left out, and
-- so are manual Runs (kind 'manual', schema 8): they fill no occurrence of the cron series.
SELECT r.id,
       r.schedule_id,
       r.task_id,
       r.scheduled_for_ms,
       r.created_at_ms,
       (SELECT count(*) FROM ql3.attempts AS a
        WHERE a.run_id = r.id AND a.attempt_number = 1) AS first_attempts,
       (SELECT count(*) FROM ql3.attempts AS a
        WHERE a.run_id = r.id AND a.attempt_number = 1
          AND a.created_at_ms <> r.created_at_ms) AS first_attempts_off_time,
       (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id) AS attempts,
       (SELECT count(*) FROM ql3.events AS e
        WHERE e.run_id = r.id AND e.kind = 'run.admitted') AS admitted_events,
       (SELECT count(*) FROM ql3.events AS e
        WHERE e.run_id = r.id AND e.kind = 'run.admitted'
          AND e.created_at_ms <> r.created_at_ms) AS admitted_events_off_time,
       (SELECT count(*) FROM ql3.events AS e
        WHERE e.run_id = r.id AND e.kind = 'attempt.queued') AS queued_events,
       (SELECT min(e.created_at_ms) FROM ql3.events AS e
        WHERE e.run_id = r.id AND e.kind = 'attempt.queued') AS first_queued_at_ms
FROM ql3.runs AS r
WHERE r.kind = 'cron'
  AND (%(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint)
ORDER BY r.schedule_id, r.scheduled_for_ms, r.id
