-- DESIGN §11, per database: schema ql3 belongs to ql3_owner; PUBLIC gets nothing in it (nor CREATE in
-- public); the three working roles and the observer may look up names in ql3. Table grants live in the migrations
-- (0002_grant_privileges.sql) so they always match the tables that exist.
CREATE SCHEMA IF NOT EXISTS ql3 AUTHORIZATION ql3_owner;
ALTER SCHEMA ql3 OWNER TO ql3_owner;
REVOKE ALL ON SCHEMA ql3 FROM PUBLIC;
GRANT USAGE ON SCHEMA ql3 TO ql3_admin, ql3_runtime, ql3_worker_ingress, ql3_observer;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE ALL ON ALL TABLES IN SCHEMA ql3 FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA ql3 FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ql3 FROM PUBLIC;
-- Functions and types are usable by PUBLIC by default; not those the owner creates later.
ALTER DEFAULT PRIVILEGES FOR ROLE ql3_owner REVOKE ALL ON FUNCTIONS FROM PUBLIC;
ALTER DEFAULT PRIVILEGES FOR ROLE ql3_owner REVOKE ALL ON TYPES FROM PUBLIC;
