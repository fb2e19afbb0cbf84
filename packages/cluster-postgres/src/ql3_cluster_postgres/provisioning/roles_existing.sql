-- Which of the QL3 group roles exist already (provisioning reports the ones it creates).
SELECT rolname FROM pg_catalog.pg_roles WHERE rolname = ANY (%(names)s) ORDER BY rolname
