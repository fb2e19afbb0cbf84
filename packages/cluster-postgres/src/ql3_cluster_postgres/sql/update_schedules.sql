-- ScheduleAdmin: write new definitions, cursors and states, bumping version so a claim held
-- across the change can no longer commit (its exact-claim fence fails: raced). The claim columns
-- are never touched, and while a claim is held updated_at_ms stays its acquired time (the
-- claim_window CHECK); otherwise it moves to the database time, never backwards.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
input AS (
    SELECT *
    FROM unnest(
        %(schedule_ids)s::bigint[], %(crons)s::text[], %(timezones)s::text[],
        %(policies)s::text[], %(graces)s::bigint[], %(starts)s::bigint[], %(ends)s::bigint[],
        %(cursors)s::bigint[], %(states)s::text[]
    ) AS i (
        schedule_id, cron, timezone, policy, grace, start_at_ms, end_at_ms, next_due_at_ms,
        state
    )
)
UPDATE ql3.trigger_schedules AS s
SET cron = i.cron,
    timezone = i.timezone,
    misfire_policy = i.policy,
    misfire_grace_ms = i.grace,
    start_at_ms = i.start_at_ms,
    end_at_ms = i.end_at_ms,
    next_due_at_ms = i.next_due_at_ms,
    state = i.state,
    version = s.version + 1,
    updated_at_ms = CASE
        WHEN s.claim_token IS NULL THEN greatest(s.updated_at_ms, obs.now_ms)
        ELSE s.updated_at_ms
    END
FROM input AS i CROSS JOIN obs
WHERE s.id = i.schedule_id
RETURNING s.id
