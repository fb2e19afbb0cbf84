-- create_login_user on an existing login: set its password again and put back the attributes a
-- QL3 login must have. The name and password are filled in by psycopg.sql as an identifier and a
-- literal (roles take no bind parameters).
ALTER ROLE {name} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION PASSWORD {password}
