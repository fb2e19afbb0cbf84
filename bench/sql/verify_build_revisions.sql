-- Bench setup only (verify), run as the database superuser: the schedule revisions the admin
-- would have written for the synthetic history (one row per input element).
INSERT INTO ql3.schedule_revisions (
    schedule_id, revision, reason, cron, timezone, misfire_policy, misfire_grace_ms,
    first_cursor_ms, end_cursor_ms, placed_after_ms, created_at_ms, ended_at_ms
)
SELECT *
FROM unnest(
    %(schedule_ids)s::bigint[], %(revisions)s::integer[], %(reasons)s::text[],
    %(crons)s::text[], %(timezones)s::text[], %(policies)s::text[], %(graces)s::bigint[],
    %(first_cursors)s::bigint[], %(end_cursors)s::bigint[], %(placed)s::bigint[],
    %(created)s::bigint[], %(ended)s::bigint[]
)
