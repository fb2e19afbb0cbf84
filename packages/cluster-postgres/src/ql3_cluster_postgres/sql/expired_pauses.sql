-- PostgresScheduleRepository.resume_expired_pauses: open spans whose until has come by the
-- database clock (the partial index schedule_pauses_until), with what the resume computes the
-- span's occurrences from. Read without a lock: ql3.resume_pause_v1 re-checks all of it.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
SELECT p.id AS pause_id, p.schedule_id, p.until_ms, s.state, s.next_due_at_ms, s.cron,
       s.timezone, s.misfire_policy, s.misfire_grace_ms, s.start_at_ms, s.end_at_ms
FROM obs
JOIN ql3.schedule_pauses AS p
    ON p.resumed_at_ms IS NULL AND p.until_ms IS NOT NULL AND p.until_ms <= obs.now_ms
JOIN ql3.trigger_schedules AS s ON s.id = p.schedule_id
ORDER BY p.until_ms, p.id
LIMIT %(limit)s
