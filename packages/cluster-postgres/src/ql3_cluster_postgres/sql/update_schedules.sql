-- ScheduleAdmin: write new definitions, cursors and states, bumping version so a claim held
-- across the change can no longer commit (its exact-claim fence fails: raced). The claim columns
-- are never touched, and while a claim is held updated_at_ms stays its acquired time (the
-- claim_window CHECK); otherwise it moves to the database time, never backwards.
-- keep_definition leaves the stored definition as it is (a state change of a row this node may
-- not be able to read); any state but `invalid` clears the quarantine reason (DESIGN §8).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
input AS (
    SELECT *
    FROM unnest(
        %(schedule_ids)s::bigint[], %(crons)s::text[], %(timezones)s::text[],
        %(policies)s::text[], %(graces)s::bigint[], %(starts)s::bigint[], %(ends)s::bigint[],
        %(cursors)s::bigint[], %(states)s::text[], %(keeps)s::boolean[]
    ) AS i (
        schedule_id, cron, timezone, policy, grace, start_at_ms, end_at_ms, next_due_at_ms,
        state, keep_definition
    )
)
UPDATE ql3.trigger_schedules AS s
SET cron = CASE WHEN i.keep_definition THEN s.cron ELSE i.cron END,
    timezone = CASE WHEN i.keep_definition THEN s.timezone ELSE i.timezone END,
    misfire_policy = CASE WHEN i.keep_definition THEN s.misfire_policy ELSE i.policy END,
    misfire_grace_ms = CASE WHEN i.keep_definition THEN s.misfire_grace_ms ELSE i.grace END,
    start_at_ms = CASE WHEN i.keep_definition THEN s.start_at_ms ELSE i.start_at_ms END,
    end_at_ms = CASE WHEN i.keep_definition THEN s.end_at_ms ELSE i.end_at_ms END,
    next_due_at_ms = i.next_due_at_ms,
    state = i.state,
    invalid_reason = CASE WHEN i.state = 'invalid' THEN s.invalid_reason END,
    invalidated_at_ms = CASE WHEN i.state = 'invalid' THEN s.invalidated_at_ms END,
    version = s.version + 1,
    updated_at_ms = CASE
        WHEN s.claim_token IS NULL THEN greatest(s.updated_at_ms, obs.now_ms)
        ELSE s.updated_at_ms
    END
FROM input AS i CROSS JOIN obs
WHERE s.id = i.schedule_id
RETURNING s.id
