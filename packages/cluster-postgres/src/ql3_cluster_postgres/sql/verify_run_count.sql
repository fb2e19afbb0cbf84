-- verify_history: how many runs are in scope (occurrences at or after since_ms), cron runs and
-- manual Runs (migration 0008) apart: only the first are occurrences.
SELECT count(*) FILTER (WHERE r.kind = 'cron') AS runs,
       count(*) FILTER (WHERE r.kind = 'manual') AS manual_runs
FROM ql3.runs AS r
WHERE r.scheduled_for_ms >= %(since_ms)s
