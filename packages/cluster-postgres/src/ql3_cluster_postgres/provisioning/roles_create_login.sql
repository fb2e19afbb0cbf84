-- create_login_user: a new login with no privilege of its own; its QL3 group grants what it may
-- do. The name and password are filled in by psycopg.sql as an identifier and a literal.
CREATE ROLE {name} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD {password}
