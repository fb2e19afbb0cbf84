-- When each replica's first session on the new primary started, by its application_name.
SELECT
    a.application_name,
    floor(extract(epoch FROM min(a.backend_start)) * 1000)::bigint AS connected_ms
FROM pg_stat_activity AS a
WHERE a.application_name = ANY(%(names)s)
GROUP BY a.application_name
