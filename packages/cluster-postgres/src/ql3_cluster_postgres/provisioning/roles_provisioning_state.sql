-- Is this database provisioned for QL3 (all five group roles and schema ql3), and may the
-- connected user provision it? `ql3 migrate` provisions it itself only for a superuser: the
-- provisioning statements reset role attributes (NOSUPERUSER, NOBYPASSRLS), which PostgreSQL
-- allows a superuser alone, CREATEROLE or not.
SELECT (SELECT count(*) FROM pg_catalog.pg_roles WHERE rolname = ANY (%(names)s))
           = cardinality(%(names)s::text[]) AS roles_present,
       EXISTS (SELECT FROM pg_catalog.pg_namespace WHERE nspname = 'ql3') AS schema_present,
       coalesce((SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user), false)
           AS superuser
