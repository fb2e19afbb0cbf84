-- Does this login exist already (create or alter it)?
SELECT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = %(name)s) AS exists
