-- QL3 schema, version 1 (DESIGN §2). Times are bigint epoch milliseconds read from the database
-- clock: floor(extract(epoch from clock_timestamp()) * 1000)::bigint. Never a node clock.
-- The schema ql3 itself is created by role provisioning (owned by ql3_owner) or by the runner.

CREATE TABLE ql3.tasks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name             text   NOT NULL,
    payload_template jsonb  NOT NULL DEFAULT '{}'::jsonb,
    created_at_ms    bigint NOT NULL,
    CONSTRAINT tasks_name_unique UNIQUE (name),
    CONSTRAINT tasks_name_length CHECK (length(name) BETWEEN 1 AND 200)
);

CREATE TABLE ql3.triggers (
    id            bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id       bigint  NOT NULL REFERENCES ql3.tasks (id),
    kind          text    NOT NULL DEFAULT 'cron',
    enabled       boolean NOT NULL DEFAULT true,
    created_at_ms bigint  NOT NULL,
    CONSTRAINT triggers_kind CHECK (kind IN ('cron'))
);

-- fillfactor leaves room for HOT updates: claim/commit/release rewrite these rows constantly.
CREATE TABLE ql3.trigger_schedules (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    trigger_id          bigint NOT NULL REFERENCES ql3.triggers (id),
    task_id             bigint NOT NULL REFERENCES ql3.tasks (id),
    cron                text   NOT NULL,
    timezone            text   NOT NULL DEFAULT 'UTC',
    misfire_policy      text   NOT NULL DEFAULT 'fire_once',
    misfire_grace_ms    bigint NOT NULL DEFAULT 60000,
    start_at_ms         bigint,
    end_at_ms           bigint,
    state               text   NOT NULL DEFAULT 'active',
    next_due_at_ms      bigint,
    claim_owner_id      text,
    claim_token         uuid,
    claim_expires_at_ms bigint,
    version             bigint NOT NULL DEFAULT 0,
    updated_at_ms       bigint NOT NULL,
    created_at_ms       bigint NOT NULL,
    CONSTRAINT trigger_schedules_trigger_unique UNIQUE (trigger_id),
    CONSTRAINT trigger_schedules_misfire_policy
        CHECK (misfire_policy IN ('fire_once', 'skip', 'catch_up')),
    CONSTRAINT trigger_schedules_grace CHECK (misfire_grace_ms >= 0),
    CONSTRAINT trigger_schedules_window
        CHECK (start_at_ms IS NULL OR end_at_ms IS NULL OR end_at_ms >= start_at_ms),
    CONSTRAINT trigger_schedules_state
        CHECK (state IN ('active', 'paused', 'exhausted', 'retired')),
    CONSTRAINT trigger_schedules_cursor
        CHECK (state NOT IN ('active', 'paused') OR next_due_at_ms IS NOT NULL),
    CONSTRAINT trigger_schedules_claim_all_or_none CHECK (
        (claim_owner_id IS NULL) = (claim_token IS NULL)
        AND (claim_token IS NULL) = (claim_expires_at_ms IS NULL)
    ),
    -- D3: while claimed, updated_at_ms is the acquired time and the lease is 1..60 s after it.
    CONSTRAINT trigger_schedules_claim_window CHECK (
        claim_expires_at_ms IS NULL
        OR (claim_expires_at_ms > updated_at_ms AND claim_expires_at_ms <= updated_at_ms + 60000)
    )
) WITH (fillfactor = 70);

-- The claim scans only due active rows, so idle schedules cost nothing (bench: scale of the claim),
-- and in its own order (next_due_at_ms, id), so many rows due at the same instant need no sort.
CREATE INDEX trigger_schedules_due ON ql3.trigger_schedules (next_due_at_ms, id)
    WHERE state = 'active';

-- History tables carry no FOREIGN KEYs on purpose: under SERIALIZABLE an FK check is a predicate
-- read of the parent's index page, which makes replicas committing *different* schedules abort each
-- other (40001). Integrity comes from the fenced commit and is checked by `ql3 verify`.
CREATE TABLE ql3.runs (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id      bigint NOT NULL,
    task_id          bigint NOT NULL,
    scheduled_for_ms bigint NOT NULL,
    owner_id         text   NOT NULL,
    claim_token      uuid   NOT NULL,
    created_at_ms    bigint NOT NULL,
    -- The durable idempotency fact: one run per occurrence, whatever happens.
    CONSTRAINT runs_occurrence_unique UNIQUE (schedule_id, scheduled_for_ms),
    -- Nothing is ever admitted before its time by the database clock.
    CONSTRAINT runs_not_early CHECK (created_at_ms >= scheduled_for_ms)
);

CREATE TABLE ql3.attempts (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id         bigint NOT NULL,
    attempt_number integer NOT NULL DEFAULT 1,
    state          text   NOT NULL DEFAULT 'queued',
    created_at_ms  bigint NOT NULL,
    updated_at_ms  bigint NOT NULL,
    CONSTRAINT attempts_number_unique UNIQUE (run_id, attempt_number),
    CONSTRAINT attempts_state CHECK (state IN ('queued', 'running', 'succeeded', 'failed')),
    CONSTRAINT attempts_times CHECK (updated_at_ms >= created_at_ms)
);

CREATE INDEX attempts_queued ON ql3.attempts (id) WHERE state = 'queued';

CREATE TABLE ql3.events (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id        bigint NOT NULL,
    attempt_id    bigint,
    kind          text   NOT NULL,
    payload       jsonb  NOT NULL DEFAULT '{}'::jsonb,
    created_at_ms bigint NOT NULL
);

CREATE INDEX events_run ON ql3.events (run_id);
