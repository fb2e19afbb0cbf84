SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'ql3') AS exists
