SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = %(name)s) AS exists
