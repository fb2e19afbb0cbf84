-- Seen from the primary: is the named standby streaming, and is it synchronous?
SELECT state, sync_state FROM pg_stat_replication WHERE application_name = %(name)s
