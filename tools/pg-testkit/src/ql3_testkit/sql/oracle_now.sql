-- The oracle's "now": the database clock as epoch milliseconds, read once per verdict (rule zero).
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
