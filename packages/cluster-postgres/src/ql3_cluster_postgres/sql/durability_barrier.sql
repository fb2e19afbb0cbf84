-- The durability barrier (DESIGN §6): a transaction that writes WAL (a transactional logical
-- message, no table touched; an xid alone writes none and would not wait), so its COMMIT waits
-- until a synchronous standby has it. Once it is acknowledged cleanly, every earlier commit on
-- this timeline is durable there too, so the durable facts read next are the ones a failover keeps.
SELECT pg_logical_emit_message(true, 'ql3', 'durability barrier')::text AS barrier_lsn
