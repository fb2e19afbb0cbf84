-- Is schema ql3 there? Role provisioning creates it; migrate refuses to run without it.
SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'ql3') AS exists
