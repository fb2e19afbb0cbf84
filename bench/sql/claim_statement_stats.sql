-- Server-side cost of the claim statement (the runtime's only FOR UPDATE ... SKIP LOCKED) in this
-- database since the last reset: execution and planning time, and how often it was re-planned.
SELECT
    sum(s.calls)::bigint AS calls,
    sum(s.plans)::bigint AS plans,
    round((sum(s.total_exec_time) / nullif(sum(s.calls), 0))::numeric, 4)::float8 AS mean_exec_ms,
    round((sum(s.total_plan_time) / nullif(sum(s.plans), 0))::numeric, 4)::float8 AS mean_plan_ms
FROM pg_stat_statements AS s
JOIN pg_database AS d ON d.oid = s.dbid
WHERE d.datname = current_database() AND s.query LIKE '%%SKIP LOCKED%%'
