-- The Coordinator's gauge ql3_schedules_overdue: active schedules whose cursor lies more than the
-- lease plus the schedule's misfire grace behind the database clock. A live replica claims a due
-- cursor at once and takes an expired claim over after one lease, so such a schedule is not being
-- decided (no replica running, or one stuck). The first bound (grace >= 0) keeps the scan on the
-- due index and off the idle tail.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
SELECT count(*) AS overdue
FROM ql3.trigger_schedules AS s, obs
WHERE s.state = 'active'
  AND s.next_due_at_ms < obs.now_ms - %(lease_ms)s::bigint
  AND s.next_due_at_ms + s.misfire_grace_ms + %(lease_ms)s::bigint < obs.now_ms
