-- ScheduleAdmin.status: every schedule at one database instant, with its claim holder, how long
-- until due and until the claim expires (by the database clock), runs admitted so far, its
-- misfire grace (how overdue a cursor may be before status calls it overdue); a quarantined
-- schedule (state `invalid`) with its reason; its window (start_at_ms, end_at_ms); the recorded
-- zone rules version. Runs admitted count the cron series only; manual Runs (triggers, migration
-- 0008) and backfilled Runs (migration 0011) are counted apart. The task's overlap policy and
-- cap of live Runs (migration 0009).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
run_counts AS (
    SELECT r.schedule_id,
           count(*) FILTER (WHERE r.kind = 'cron') AS runs,
           max(r.created_at_ms) FILTER (WHERE r.kind = 'cron') AS last_admitted_at_ms,
           count(*) FILTER (WHERE r.kind = 'manual') AS manual_runs,
           count(*) FILTER (WHERE r.kind = 'backfill') AS backfilled_runs
    FROM ql3.runs AS r
    GROUP BY r.schedule_id
),
schedules AS (
    SELECT s.id, t.name, s.state, s.next_due_at_ms, s.claim_owner_id, s.claim_expires_at_ms,
           s.version, coalesce(rc.runs, 0) AS runs, rc.last_admitted_at_ms, s.misfire_grace_ms,
           coalesce(rc.manual_runs, 0) AS manual_runs,
           coalesce(rc.backfilled_runs, 0) AS backfilled_runs,
           s.invalid_reason, s.invalidated_at_ms, s.start_at_ms, s.end_at_ms,
           t.overlap, t.max_running
    FROM ql3.trigger_schedules AS s
    JOIN ql3.tasks AS t ON t.id = s.task_id
    LEFT JOIN run_counts AS rc ON rc.schedule_id = s.id
)
SELECT obs.now_ms, x.id, x.name, x.state, x.next_due_at_ms, x.claim_owner_id,
       x.claim_expires_at_ms, x.version, x.runs, x.last_admitted_at_ms, x.misfire_grace_ms,
       x.manual_runs, x.backfilled_runs,
       x.invalid_reason, x.invalidated_at_ms, x.start_at_ms, x.end_at_ms,
       x.overlap, x.max_running,
       (SELECT z.version FROM ql3.zone_rules AS z) AS zone_rules_version
FROM obs
LEFT JOIN schedules AS x ON true
ORDER BY x.name
