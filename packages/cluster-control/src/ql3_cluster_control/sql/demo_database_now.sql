-- The database clock, the only clock QL3 reads (rule zero).
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
