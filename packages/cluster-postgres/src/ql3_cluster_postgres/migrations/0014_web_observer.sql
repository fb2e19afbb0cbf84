-- Schema version 14: the web console's least-privilege reader and the recorded verify verdicts.
--
-- ql3_observer (a NOLOGIN group created by role provisioning, DESIGN §11) reads what the console
-- shows and nothing else: no INSERT, UPDATE, DELETE or EXECUTE anywhere, and column grants keep
-- the fencing tokens (claim and lease tokens), task commands and payloads out of its reach.
-- ql3.verify_results holds one row per `ql3 verify --record`: the verdict the console shows,
-- stamped by the database clock when it is written (never a time the client sends).

CREATE TABLE ql3.verify_results (
    id               bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    recorded_at_ms   bigint  NOT NULL
        DEFAULT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,
    recorded_by      text    NOT NULL DEFAULT session_user,
    checked_at_ms    bigint  NOT NULL,
    ok               boolean NOT NULL,
    schedules        integer NOT NULL,
    runs             bigint  NOT NULL,
    violation_total  bigint  NOT NULL,
    -- {rule: count} over every finding; `violations` the listed ones (capped per rule), each
    -- {rule, schedule_id, detail}.
    violation_counts jsonb   NOT NULL,
    violations       jsonb   NOT NULL,
    CONSTRAINT verify_results_ok CHECK (ok = (violation_total = 0)),
    CONSTRAINT verify_results_counts CHECK (schedules >= 0 AND runs >= 0 AND violation_total >= 0)
);

-- The admin records a verdict; the two stamped columns are the database's, never the client's.
GRANT SELECT ON ql3.verify_results TO ql3_admin;
GRANT INSERT (checked_at_ms, ok, schedules, runs, violation_total, violation_counts, violations)
    ON ql3.verify_results TO ql3_admin;

-- What the console reads, column by column where a table holds more than it shows.
GRANT USAGE ON SCHEMA ql3 TO ql3_observer;
GRANT SELECT (id, name, overlap, max_running) ON ql3.tasks TO ql3_observer;
GRANT SELECT (id, task_id, cron, timezone, misfire_policy, misfire_grace_ms, start_at_ms,
              end_at_ms, state, next_due_at_ms, claim_owner_id, claim_expires_at_ms, version,
              updated_at_ms, created_at_ms, invalid_reason, invalidated_at_ms)
    ON ql3.trigger_schedules TO ql3_observer;
GRANT SELECT (id, schedule_id, task_id, scheduled_for_ms, owner_id, created_at_ms, kind)
    ON ql3.runs TO ql3_observer;
GRANT SELECT (id, run_id, attempt_number, state, created_at_ms, updated_at_ms, not_before_ms,
              worker_id, worker_login, lease_expires_at_ms, started_at_ms, finished_at_ms,
              exit_code, output_tail)
    ON ql3.attempts TO ql3_observer;
GRANT SELECT (id, schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, misfire_policy,
              reason, owner_id, created_at_ms)
    ON ql3.skipped_occurrences TO ql3_observer;
GRANT SELECT (id, schedule_id, paused_at_ms, paused_by, reason, until_ms, cause, resumed_at_ms)
    ON ql3.schedule_pauses TO ql3_observer;
GRANT SELECT (version, recorded_at_ms) ON ql3.zone_rules TO ql3_observer;
GRANT SELECT ON ql3.verify_results TO ql3_observer;
-- Every process checks the schema version before it serves (the console too).
GRANT SELECT ON ql3.schema_migrations TO ql3_observer;

-- The alerts table comes with its own migration (schema 13): when it exists, the console reads
-- what each alert is and where its delivery stands, never its lease token, command or webhook
-- (a URL may carry a secret).
DO $$
BEGIN
    IF to_regclass('ql3.alerts') IS NOT NULL THEN
        GRANT SELECT (id, schedule_id, kind, subject_key, run_id, pause_id, occurrence_ms,
                      raised_at_ms, raised_by, delivery_state, delivery_attempts, delivered_at_ms)
            ON ql3.alerts TO ql3_observer;
    END IF;
END
$$;

-- The replicas page asks for each owner's latest admission: one index probe per owner instead
-- of a scan of the whole history (bench: console page time with 1 M Runs).
CREATE INDEX runs_owner_admitted ON ql3.runs (owner_id, created_at_ms);
