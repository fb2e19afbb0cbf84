-- Server-side cost of the statements run in this database since the last reset (diagnostics:
-- which statement bounds a figure). Needs pg_stat_statements (preloaded by the bench cluster).
SELECT
    s.calls,
    s.plans,
    round(s.mean_exec_time::numeric, 4)::float8 AS mean_exec_ms,
    round(s.mean_plan_time::numeric, 4)::float8 AS mean_plan_ms,
    round(s.total_exec_time::numeric, 1)::float8 AS total_exec_ms,
    left(regexp_replace(s.query, '\s+', ' ', 'g'), 70) AS query
FROM pg_stat_statements AS s
JOIN pg_database AS d ON d.oid = s.dbid
WHERE d.datname = current_database()
ORDER BY s.total_exec_time DESC
LIMIT %(limit)s
