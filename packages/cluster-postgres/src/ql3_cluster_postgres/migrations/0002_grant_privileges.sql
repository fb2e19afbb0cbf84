-- Least privilege (DESIGN §11). Runs as ql3_owner (the migration runner sets the role), so the owner is
-- the grantor and the grants ship with the tables they cover: a later migration that adds a table
-- grants on it in the same file. PUBLIC gets nothing (schema ACL, see role provisioning). Nobody but
-- ql3_owner may DELETE or TRUNCATE anything, history (runs, attempts, events) above all.

-- ql3_admin manages definitions of tasks, triggers and schedules and reads history (status,
-- verify); it never writes claim columns, neither by INSERT nor by UPDATE.
GRANT SELECT ON ql3.tasks, ql3.triggers, ql3.trigger_schedules, ql3.runs, ql3.attempts, ql3.events
    TO ql3_admin;
GRANT INSERT ON ql3.tasks, ql3.triggers TO ql3_admin;
GRANT INSERT (trigger_id, task_id, cron, timezone, misfire_policy, misfire_grace_ms, start_at_ms,
              end_at_ms, state, next_due_at_ms, version, updated_at_ms, created_at_ms)
    ON ql3.trigger_schedules TO ql3_admin;
GRANT UPDATE (name, payload_template) ON ql3.tasks TO ql3_admin;
GRANT UPDATE (enabled) ON ql3.triggers TO ql3_admin;
GRANT UPDATE (cron, timezone, misfire_policy, misfire_grace_ms, start_at_ms, end_at_ms, state,
              next_due_at_ms, version, updated_at_ms)
    ON ql3.trigger_schedules TO ql3_admin;

-- ql3_runtime claims, commits and releases: column-level UPDATE of the claim, cursor, state,
-- version and time columns only; appends history.
GRANT SELECT ON ql3.tasks, ql3.triggers, ql3.trigger_schedules, ql3.runs, ql3.attempts, ql3.events
    TO ql3_runtime;
GRANT UPDATE (next_due_at_ms, state, claim_owner_id, claim_token, claim_expires_at_ms, version,
              updated_at_ms)
    ON ql3.trigger_schedules TO ql3_runtime;
GRANT INSERT ON ql3.runs, ql3.attempts, ql3.events TO ql3_runtime;

-- ql3_worker_ingress takes queued attempts, moves their state and appends events; it reads the
-- task (payload template) of the work it runs, and has no access to triggers or schedules.
GRANT SELECT ON ql3.tasks, ql3.runs, ql3.attempts, ql3.events TO ql3_worker_ingress;
GRANT UPDATE (state, updated_at_ms) ON ql3.attempts TO ql3_worker_ingress;
GRANT INSERT ON ql3.events TO ql3_worker_ingress;
