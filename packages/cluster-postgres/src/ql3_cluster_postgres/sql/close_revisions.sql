-- ScheduleAdmin: end the live revision of each changed schedule at its cursor before the change
-- (NULL when it was exhausted), at the database time, never earlier than the revision began.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
input AS (
    SELECT *
    FROM unnest(%(schedule_ids)s::bigint[], %(end_cursors)s::bigint[])
        AS i (schedule_id, end_cursor_ms)
)
UPDATE ql3.schedule_revisions AS v
SET ended_at_ms = greatest(obs.now_ms, v.created_at_ms),
    end_cursor_ms = i.end_cursor_ms
FROM input AS i CROSS JOIN obs
WHERE v.schedule_id = i.schedule_id
  AND v.ended_at_ms IS NULL
