-- A table the failover measurement writes to (created on the primary, replicated to standbys).
CREATE TABLE IF NOT EXISTS public.failover_probe (written_at_ms bigint NOT NULL)
