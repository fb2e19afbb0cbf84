SELECT pg_is_in_recovery() AS in_recovery
