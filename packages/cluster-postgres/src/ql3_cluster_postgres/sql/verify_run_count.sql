-- verify_history: how many runs are in scope (occurrences at or after since_ms), cron runs,
-- manual Runs (migration 0008) and backfilled Runs (migration 0011) apart: a backfilled Run is an
-- occurrence first recorded skipped, a manual one never an occurrence.
SELECT count(*) FILTER (WHERE r.kind = 'cron') AS runs,
       count(*) FILTER (WHERE r.kind = 'manual') AS manual_runs,
       count(*) FILTER (WHERE r.kind = 'backfill') AS backfilled_runs
FROM ql3.runs AS r
WHERE r.scheduled_for_ms >= %(since_ms)s
