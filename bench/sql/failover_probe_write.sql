-- One write on the node being promoted: fails while it is a standby, succeeds (and stamps the
-- database time) from the moment it accepts writes.
INSERT INTO public.failover_probe (written_at_ms)
SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint
RETURNING written_at_ms
