-- Duplicates (more than one run per occurrence, from a GROUP BY), early admissions, the 1:1:2
-- run/attempt/event ratio, and claims left at rest after the replicas stopped.
SELECT
    (SELECT coalesce(sum(n - 1), 0)::bigint
       FROM (SELECT count(*) AS n FROM ql3.runs
             GROUP BY schedule_id, scheduled_for_ms HAVING count(*) > 1) AS d) AS duplicates,
    (SELECT count(*) FROM ql3.runs WHERE created_at_ms < scheduled_for_ms) AS early,
    (SELECT count(*) FROM ql3.runs) AS runs,
    (SELECT count(*) FROM ql3.attempts) AS attempts,
    (SELECT count(*) FROM ql3.events) AS events,
    (SELECT count(*) FROM ql3.trigger_schedules WHERE claim_token IS NOT NULL) AS claims_held
