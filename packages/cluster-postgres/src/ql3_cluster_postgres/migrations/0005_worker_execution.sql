-- QL3 schema, version 5 (DESIGN §10): workers execute what was admitted. A task says what its runs
-- execute (a shell command, or nothing: a Python task run by name) and how (attempts, timeout,
-- retry backoff); an attempt records who holds it under which lease, when it may start, how it
-- ended. Every time here is a database time (clock_timestamp()), never a worker's (rule zero).
-- Grants ship with the columns they cover, as in 0002.

-- 1. What a task runs -------------------------------------------------------------------------------

-- The bounds are ql3_runtime_core's constants of the same names (TaskExecution): the API, the CLI
-- and the database refuse the same values. A command is run with /bin/sh -c; NULL means a
-- Python task, executed only by a worker that registered a callable under the task's name.
ALTER TABLE ql3.tasks
    ADD COLUMN command          text,
    ADD COLUMN max_attempts     integer NOT NULL DEFAULT 3,
    ADD COLUMN timeout_ms       bigint  NOT NULL DEFAULT 3600000,
    ADD COLUMN retry_backoff_ms bigint  NOT NULL DEFAULT 10000,
    ADD CONSTRAINT tasks_command_shape
        CHECK (command IS NULL OR (length(command) BETWEEN 1 AND 8192 AND command ~ '\S')),
    ADD CONSTRAINT tasks_max_attempts CHECK (max_attempts BETWEEN 1 AND 100),
    ADD CONSTRAINT tasks_timeout CHECK (timeout_ms BETWEEN 1000 AND 86400000),
    ADD CONSTRAINT tasks_retry_backoff CHECK (retry_backoff_ms BETWEEN 0 AND 86400000);

-- 2. Attempts: leases, outcomes, successors -------------------------------------------------------

-- not_before_ms: a successor may not start before it (its predecessor's end + the backoff); NULL
--   for a first attempt, which may start once admitted (created_at_ms). The admission commit
--   (0001's columns) is unchanged.
-- worker_id / lease_token / lease_expires_at_ms: the holder of a running attempt. The token
--   fences heartbeats, finishes and releases (a worker id is for people and may be reused); the
--   expiry is database time + lease, and only a statement reading the database clock decides
--   that it passed. started_at_ms: when it was taken. finished_at_ms: when it ended.
-- exit_code: the command's return code (negative: the signal that killed it); NULL for a
--   Python task. output_tail: the last 4 096 characters of its output (or the Python error).
ALTER TABLE ql3.attempts
    ADD COLUMN not_before_ms       bigint,
    ADD COLUMN worker_id           text,
    ADD COLUMN lease_token         uuid,
    ADD COLUMN lease_expires_at_ms bigint,
    ADD COLUMN started_at_ms       bigint,
    ADD COLUMN finished_at_ms      bigint,
    ADD COLUMN exit_code           integer,
    ADD COLUMN output_tail         text;

-- Before this version a running attempt had no lease (the early WorkerIngress took attempts
-- without one). Give each a lease that has already expired, held by nobody who can renew it: the
-- first worker to look marks it abandoned and queues its successor, as for a worker that died.
UPDATE ql3.attempts
SET worker_id = 'before-schema-5',
    lease_token = gen_random_uuid(),
    started_at_ms = updated_at_ms,
    lease_expires_at_ms = updated_at_ms + 1
WHERE state = 'running';

ALTER TABLE ql3.attempts
    DROP CONSTRAINT attempts_state,
    ADD CONSTRAINT attempts_state CHECK (
        state IN ('queued', 'running', 'succeeded', 'failed', 'timed_out', 'abandoned')
    ),
    ADD CONSTRAINT attempts_number_positive CHECK (attempt_number >= 1),
    -- A running attempt, and only a running one, has a holder, a token and a lease that ends
    -- after it started (statements never move a lease or any time of the row backwards).
    ADD CONSTRAINT attempts_lease CHECK (
        (state = 'running') = (lease_token IS NOT NULL)
        AND (lease_token IS NULL) = (lease_expires_at_ms IS NULL)
        AND (
            lease_token IS NULL
            OR (worker_id IS NOT NULL AND started_at_ms IS NOT NULL
                AND lease_expires_at_ms > started_at_ms)
        )
    ),
    ADD CONSTRAINT attempts_worker_length
        CHECK (worker_id IS NULL OR length(worker_id) BETWEEN 1 AND 200),
    ADD CONSTRAINT attempts_output_tail_length
        CHECK (output_tail IS NULL OR length(output_tail) <= 4096),
    ADD CONSTRAINT attempts_finished CHECK (
        finished_at_ms IS NULL
        OR (state IN ('succeeded', 'failed', 'timed_out', 'abandoned')
            AND finished_at_ms >= created_at_ms
            AND (started_at_ms IS NULL OR finished_at_ms >= started_at_ms))
    ),
    ADD CONSTRAINT attempts_not_before CHECK (not_before_ms IS NULL OR not_before_ms >= created_at_ms);

-- Never two live attempts of one Run: the database, not a worker, guarantees it. A successor is
-- inserted by the statement that ends its predecessor, after that row left the index.
CREATE UNIQUE INDEX attempts_one_live ON ql3.attempts (run_id) WHERE state IN ('queued', 'running');

-- Workers take queued attempts in the order they became eligible; the index holds only the queue.
DROP INDEX ql3.attempts_queued;
CREATE INDEX attempts_queued ON ql3.attempts ((coalesce(not_before_ms, created_at_ms)), id)
    WHERE state = 'queued';

-- Workers look for expired leases on every poll; the index holds only running attempts.
CREATE INDEX attempts_running_lease ON ql3.attempts (lease_expires_at_ms) WHERE state = 'running';

-- 3. Grants -----------------------------------------------------------------------------------------

-- ql3_admin defines what tasks run (it already inserts tasks and reads attempts).
GRANT UPDATE (command, max_attempts, timeout_ms, retry_backoff_ms) ON ql3.tasks TO ql3_admin;

-- ql3_worker_ingress holds, renews, finishes, abandons and releases attempts, and queues the
-- successor of one that did not succeed. It still cannot touch an attempt's run, number or
-- creation time, nor delete anything.
GRANT UPDATE (worker_id, lease_token, lease_expires_at_ms, started_at_ms, finished_at_ms,
              exit_code, output_tail)
    ON ql3.attempts TO ql3_worker_ingress;
GRANT INSERT (run_id, attempt_number, state, not_before_ms, created_at_ms, updated_at_ms)
    ON ql3.attempts TO ql3_worker_ingress;
