-- pgbench's script for the commit ceiling: one single-row INSERT per transaction (autocommit,
-- synchronous_commit as the server sets it: on in a measured run).
INSERT INTO public.ceiling_commits (at) VALUES (clock_timestamp());
