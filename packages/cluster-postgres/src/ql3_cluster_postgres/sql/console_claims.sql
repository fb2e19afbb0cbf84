-- ConsoleReader, replicas page: the live claims (a schedule a replica holds until its lease
-- expires), with the database instant they were read at.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
SELECT obs.now_ms,
       s.id AS schedule_id,
       t.name,
       s.claim_owner_id,
       s.updated_at_ms AS claimed_at_ms,
       s.claim_expires_at_ms
FROM obs
CROSS JOIN ql3.trigger_schedules AS s
JOIN ql3.tasks AS t ON t.id = s.task_id
WHERE s.claim_owner_id IS NOT NULL AND s.claim_expires_at_ms > obs.now_ms
ORDER BY s.claim_owner_id, t.name
