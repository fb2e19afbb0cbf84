-- The Coordinator's sleep hint, by the database clock: milliseconds until the earliest moment an
-- active schedule becomes claimable (its cursor, or its claim's expiry if that is later).
-- `bound` is the earliest unclaimed cursor (an ordered walk of trigger_schedules_due); only rows
-- due no later than it can be earlier, so the scan never touches the idle tail.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
bound AS MATERIALIZED (
    SELECT s.next_due_at_ms
    FROM ql3.trigger_schedules AS s
    WHERE s.state = 'active' AND s.claim_expires_at_ms IS NULL
    ORDER BY s.next_due_at_ms
    LIMIT 1
)
SELECT
    greatest(
        min(greatest(s.next_due_at_ms, s.claim_expires_at_ms, s.updated_at_ms)) - obs.now_ms,
        0
    ) AS due_in_ms
FROM ql3.trigger_schedules AS s, obs
WHERE s.state = 'active'
  AND s.next_due_at_ms <= coalesce((SELECT next_due_at_ms FROM bound), 9223372036854775807)
GROUP BY obs.now_ms
