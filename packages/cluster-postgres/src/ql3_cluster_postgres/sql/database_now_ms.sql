-- The database clock in epoch milliseconds: the only clock QL3 displays or compares (rule zero).
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
