-- Only the QL3 groups (and superusers) may connect; a database cloned from a template does not
-- inherit the template's ACL, so this runs for every database.
REVOKE ALL ON DATABASE {database} FROM PUBLIC;
GRANT CONNECT ON DATABASE {database} TO ql3_owner, ql3_admin, ql3_runtime, ql3_worker_ingress,
    ql3_observer;
