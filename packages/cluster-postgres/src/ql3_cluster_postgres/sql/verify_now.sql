-- verify_history: the database clock, sampled once for the whole check (rule zero).
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
