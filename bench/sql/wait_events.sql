-- What the workers' backends are doing right now: a wait event, or on CPU (NULL wait) while
-- active. Sampled repeatedly, this shows what bounds a figure inside the server.
SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS what
FROM pg_stat_activity
WHERE usename = %(user)s AND backend_type = 'client backend' AND state = 'active'
