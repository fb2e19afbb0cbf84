-- Backend connections held by a login user (one replica runs as that user at a time).
SELECT count(*) AS connections,
       coalesce(array_agg(DISTINCT application_name), '{}') AS application_names
FROM pg_stat_activity
WHERE usename = %(user)s
