-- QL3 schema, version 7: a worker writes attempts and events only through the functions below.
-- ql3_worker_ingress loses every direct INSERT and UPDATE on ql3 tables: a login of that role could
-- otherwise insert attempts in any state at any time, rewrite a failed attempt as succeeded, move
-- times backwards, finish, renew or release another worker's attempt (lease tokens are readable by
-- every worker login, so a token alone fences nothing) and append any event to any run.
--
-- Each function is SECURITY DEFINER (it runs as ql3_owner, who owns the tables), with a fixed
-- search_path, EXECUTE revoked from PUBLIC and granted to ql3_worker_ingress only. Each reads the
-- database clock once and takes every time it writes from it (no time is ever a parameter), moves
-- no time of a row backwards, makes only the transitions of the attempt state machine
-- (queued -> running -> succeeded | failed | timed_out | abandoned, running -> queued when handed
-- back), appends the event of each transition, and binds a lease to the login that took it:
-- `worker_login` records session_user at the take, and renew, finish, release and append_event
-- act only where both the lease token and the login match. session_user is the login of the
-- connection: a SET ROLE inside the session does not change it.
--
-- A worker that cannot renew its lease kills its command before the lease ends (the worker's kill
-- margin); the successor of an abandoned attempt is still not queued before the old lease's expiry
-- plus ql3.attempt_successor_grace_ms(), which covers that margin, so one Run's command never runs
-- in two places at once even when the old worker noticed its loss late.

-- 1. Who holds an attempt ------------------------------------------------------------------------

-- worker_login: the login (session_user) whose take made the attempt running; kept once it ends
--   (history: which login ran it), cleared when the attempt is handed back (released).
-- taken_lease_token: the lease token of that take. lease_token is cleared when the attempt ends;
--   this one is kept, so a worker retrying a finish whose answer it lost can tell its own record
--   ("already recorded succeeded by this worker") from another's.
ALTER TABLE ql3.attempts
    ADD COLUMN worker_login      text,
    ADD COLUMN taken_lease_token uuid;

-- Workers are stopped for this upgrade; an attempt still running has no known login. Its lease
-- can no longer be renewed or finished by anybody: it expires and is abandoned like a dead
-- worker's, and its successor is queued.
UPDATE ql3.attempts
SET worker_login = 'before-schema-7',
    taken_lease_token = lease_token
WHERE state = 'running';

ALTER TABLE ql3.attempts
    -- A lease is always held by a login, under the token of the take.
    ADD CONSTRAINT attempts_lease_login CHECK (
        lease_token IS NULL
        OR (worker_login IS NOT NULL AND taken_lease_token = lease_token)
    ),
    ADD CONSTRAINT attempts_login_length
        CHECK (worker_login IS NULL OR length(worker_login) BETWEEN 1 AND 63);

-- 2. The grace between a lost lease and its successor --------------------------------------------

-- Milliseconds after an abandoned attempt's lease expiry before its successor may start. The
-- worker starts killing a command 3 000 ms before its lease can have expired (SIGTERM, SIGKILL
-- 2 000 ms later, 1 000 ms left for polling, scheduling and reaping); this grace covers that
-- whole margin again, for a worker that noticed its loss only at the expiry, plus 2 000 ms for a
-- stalled worker and the difference between the database clock and the worker's monotonic one.
-- ql3_runtime_core.ATTEMPT_SUCCESSOR_GRACE_MS is the same number (a test compares them).
CREATE FUNCTION ql3.attempt_successor_grace_ms() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN 5000::bigint;

-- 3. Bounds every function checks before it writes -----------------------------------------------

-- Refuse a bad argument with SQLSTATE 22023, naming the argument and its value.
CREATE FUNCTION ql3.worker_refuse_v1(p_argument text, p_requirement text, p_value text)
    RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'invalid_parameter_value',
        MESSAGE = format('%s: %s, got %s', p_argument, p_requirement, coalesce(p_value, 'NULL'));
END
$$;

-- The lease and batch bounds of ql3_cluster_postgres._bounds (checked there before sending).
CREATE FUNCTION ql3.worker_check_lease_v1(p_lease_token uuid, p_lease_ms bigint) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_lease_token IS NULL THEN
        PERFORM ql3.worker_refuse_v1('lease_token', 'must be given', NULL);
    END IF;
    IF p_lease_ms IS NULL OR p_lease_ms NOT BETWEEN 1000 AND 60000 THEN
        PERFORM ql3.worker_refuse_v1('lease_ms', 'must be within 1000..60000', p_lease_ms::text);
    END IF;
END
$$;

CREATE FUNCTION ql3.worker_check_limit_v1(p_batch_limit integer) RETURNS void
    LANGUAGE plpgsql
    SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_batch_limit IS NULL OR p_batch_limit NOT BETWEEN 1 AND 100000 THEN
        PERFORM ql3.worker_refuse_v1('limit', 'must be within 1..100000', p_batch_limit::text);
    END IF;
END
$$;

-- 4. Take ----------------------------------------------------------------------------------------

-- Take up to p_batch_limit queued attempts whose time has come by the database clock (a first
-- attempt once admitted, a successor from its not_before_ms), oldest eligible first, only of
-- command tasks (when p_commands) and of the Python tasks named, and make each running under the
-- caller's lease token and login until the database time + p_lease_ms; attempt.running each.
-- SKIP LOCKED lets workers take disjoint attempts without waiting on each other.
CREATE FUNCTION ql3.worker_take_attempts_v1(
    p_worker_id text,
    p_lease_token uuid,
    p_lease_ms bigint,
    p_batch_limit integer,
    p_python_tasks text[],
    p_commands boolean
) RETURNS TABLE (
    attempt_id bigint,
    run_id bigint,
    schedule_id bigint,
    task_id bigint,
    task_name text,
    attempt_number integer,
    scheduled_for_ms bigint,
    payload jsonb,
    command text,
    max_attempts integer,
    timeout_ms bigint,
    retry_backoff_ms bigint,
    created_at_ms bigint,
    eligible_at_ms bigint,
    taken_at_ms bigint,
    lease_expires_at_ms bigint
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    PERFORM ql3.worker_check_lease_v1(p_lease_token, p_lease_ms);
    PERFORM ql3.worker_check_limit_v1(p_batch_limit);
    RETURN QUERY
    WITH picked AS (
        SELECT a.id
        FROM ql3.attempts AS a
        JOIN ql3.runs AS r ON r.id = a.run_id
        JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE a.state = 'queued'
          AND coalesce(a.not_before_ms, a.created_at_ms) <= v_now_ms
          AND CASE
              WHEN k.command IS NULL THEN k.name = ANY (coalesce(p_python_tasks, '{}'))
              ELSE coalesce(p_commands, false)
          END
        ORDER BY coalesce(a.not_before_ms, a.created_at_ms), a.id
        LIMIT p_batch_limit
        FOR UPDATE OF a SKIP LOCKED
    ),
    taken AS (
        UPDATE ql3.attempts AS a
        SET state = 'running',
            worker_id = p_worker_id,
            worker_login = session_user,
            lease_token = p_lease_token,
            taken_lease_token = p_lease_token,
            started_at_ms = greatest(a.updated_at_ms, v_now_ms),
            lease_expires_at_ms = greatest(a.updated_at_ms, v_now_ms) + p_lease_ms,
            updated_at_ms = greatest(a.updated_at_ms, v_now_ms)
        FROM picked AS p
        WHERE a.id = p.id
        RETURNING a.id, a.run_id, a.attempt_number, a.created_at_ms, a.not_before_ms,
                  a.started_at_ms, a.lease_expires_at_ms, a.worker_id
    ),
    running_events AS (
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        SELECT t.run_id, t.id, 'attempt.running',
               jsonb_build_object('worker_id', t.worker_id,
                                  'lease_expires_at_ms', t.lease_expires_at_ms),
               t.started_at_ms
        FROM taken AS t
        ORDER BY t.id
        RETURNING ev.id
    )
    SELECT t.id, t.run_id, r.schedule_id, r.task_id, k.name, t.attempt_number,
           r.scheduled_for_ms, k.payload_template, k.command, k.max_attempts, k.timeout_ms,
           k.retry_backoff_ms, t.created_at_ms, coalesce(t.not_before_ms, t.created_at_ms),
           t.started_at_ms, t.lease_expires_at_ms
    FROM taken AS t
    JOIN ql3.runs AS r ON r.id = t.run_id
    JOIN ql3.tasks AS k ON k.id = r.task_id
    ORDER BY coalesce(t.not_before_ms, t.created_at_ms), t.id;
END
$$;

-- 5. Renew ---------------------------------------------------------------------------------------

-- The heartbeat: extend to the database time + p_lease_ms the leases this login holds under the
-- token that have not expired by the database clock (an expired lease is over even before
-- another worker marks it abandoned). A lease never shrinks. No event.
CREATE FUNCTION ql3.worker_renew_leases_v1(
    p_lease_token uuid,
    p_attempt_ids bigint[],
    p_lease_ms bigint
) RETURNS TABLE (attempt_id bigint, lease_expires_at_ms bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    PERFORM ql3.worker_check_lease_v1(p_lease_token, p_lease_ms);
    RETURN QUERY
    WITH renewed AS (
        UPDATE ql3.attempts AS a
        SET lease_expires_at_ms = greatest(a.lease_expires_at_ms, v_now_ms + p_lease_ms),
            updated_at_ms = greatest(a.updated_at_ms, v_now_ms)
        WHERE a.id = ANY (p_attempt_ids)
          AND a.state = 'running'
          AND a.lease_token = p_lease_token
          AND a.worker_login = session_user
          AND a.lease_expires_at_ms > v_now_ms
        RETURNING a.id, a.lease_expires_at_ms
    )
    SELECT r.id, r.lease_expires_at_ms FROM renewed AS r ORDER BY r.id;
END
$$;

-- 6. Finish --------------------------------------------------------------------------------------

-- Record how an attempt this login holds under the token (still running) ended: succeeded,
-- failed or timed_out, with its exit code and output tail, at the database time. One that did
-- not succeed gets its successor queued here while max_attempts allows, not before the database
-- time + the task's retry backoff; both events are appended. A finish is accepted as long as
-- nobody marked the attempt abandoned, even past its lease: the work is done, and recording it
-- beats running it again. When nothing is written, the answer says why: the attempt's state
-- (read after the refused UPDATE, so a concurrent abandonment is seen) and whether this login's
-- take under this token is the one that ended it (a retried finish finding its own record).
-- Called inside a Python task's own transaction, a refusal raises nothing: the caller rolls the
-- task's writes back.
CREATE FUNCTION ql3.worker_finish_attempt_v1(
    p_attempt_id bigint,
    p_lease_token uuid,
    p_state text,
    p_exit_code integer,
    p_output_tail text
) RETURNS TABLE (
    finished_id bigint,
    finished_at_ms bigint,
    next_attempt_id bigint,
    next_not_before_ms bigint,
    state_found text,
    ended_by_this_lease boolean
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_id bigint;
    v_run_id bigint;
    v_number integer;
    v_worker_id text;
    v_finished_at_ms bigint;
    v_max_attempts integer;
    v_backoff_ms bigint;
    v_next_id bigint;
    v_next_not_before_ms bigint;
    v_found text;
    v_ours boolean;
BEGIN
    IF p_lease_token IS NULL THEN
        PERFORM ql3.worker_refuse_v1('lease_token', 'must be given', NULL);
    END IF;
    IF p_state IS NULL OR p_state NOT IN ('succeeded', 'failed', 'timed_out') THEN
        PERFORM ql3.worker_refuse_v1(
            'state', 'must be succeeded, failed or timed_out', quote_nullable(p_state));
    END IF;
    UPDATE ql3.attempts AS a
    SET state = p_state,
        exit_code = p_exit_code,
        output_tail = p_output_tail,
        finished_at_ms = greatest(a.updated_at_ms, v_now_ms),
        updated_at_ms = greatest(a.updated_at_ms, v_now_ms),
        lease_token = NULL,
        lease_expires_at_ms = NULL
    WHERE a.id = p_attempt_id
      AND a.state = 'running'
      AND a.lease_token = p_lease_token
      AND a.worker_login = session_user
    RETURNING a.id, a.run_id, a.attempt_number, a.worker_id, a.finished_at_ms
        INTO v_id, v_run_id, v_number, v_worker_id, v_finished_at_ms;
    IF v_id IS NULL THEN
        SELECT a.state, a.taken_lease_token = p_lease_token AND a.worker_login = session_user
            INTO v_found, v_ours
            FROM ql3.attempts AS a
            WHERE a.id = p_attempt_id;
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::bigint, NULL::bigint, v_found,
                            coalesce(v_ours, false);
        RETURN;
    END IF;
    SELECT k.max_attempts, k.retry_backoff_ms INTO v_max_attempts, v_backoff_ms
        FROM ql3.runs AS r JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE r.id = v_run_id;
    -- The predecessor has left attempts_one_live (it is final now) before its successor enters.
    IF p_state <> 'succeeded' AND v_number < v_max_attempts THEN
        INSERT INTO ql3.attempts AS n (
            run_id, attempt_number, state, not_before_ms, created_at_ms, updated_at_ms
        )
        VALUES (v_run_id, v_number + 1, 'queued', v_finished_at_ms + v_backoff_ms,
                v_finished_at_ms, v_finished_at_ms)
        RETURNING n.id, n.not_before_ms
            INTO v_next_id, v_next_not_before_ms;
    END IF;
    INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
    VALUES (v_run_id, v_id, 'attempt.' || p_state,
            jsonb_build_object('worker_id', v_worker_id, 'exit_code', p_exit_code,
                               'retried', v_next_id IS NOT NULL),
            v_finished_at_ms);
    IF v_next_id IS NOT NULL THEN
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        VALUES (v_run_id, v_next_id, 'attempt.queued',
                jsonb_build_object('not_before_ms', v_next_not_before_ms,
                                   'after_attempt_id', v_id, 'after', p_state),
                v_finished_at_ms);
    END IF;
    RETURN QUERY SELECT v_id, v_finished_at_ms, v_next_id, v_next_not_before_ms, 'running'::text,
                        true;
END
$$;

-- 7. Release -------------------------------------------------------------------------------------

-- A worker hands back attempts this login holds under the token: a stopping worker what it could
-- not finish within its grace (after their commands were killed), a worker settling a take whose
-- answer it lost what it never started. Each goes back to queued with the same attempt number,
-- eligible at once (its not_before_ms, if any, has passed), and appends attempt.released. Being
-- handed back is not the task's failure, so no attempt is used up. p_worker_id must name the
-- holder recorded by the take.
CREATE FUNCTION ql3.worker_release_attempts_v1(
    p_worker_id text,
    p_lease_token uuid,
    p_attempt_ids bigint[]
) RETURNS TABLE (attempt_id bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    IF p_lease_token IS NULL THEN
        PERFORM ql3.worker_refuse_v1('lease_token', 'must be given', NULL);
    END IF;
    RETURN QUERY
    WITH released AS (
        UPDATE ql3.attempts AS a
        SET state = 'queued',
            worker_id = NULL,
            worker_login = NULL,
            lease_token = NULL,
            taken_lease_token = NULL,
            lease_expires_at_ms = NULL,
            started_at_ms = NULL,
            updated_at_ms = greatest(a.updated_at_ms, v_now_ms)
        WHERE a.id = ANY (p_attempt_ids)
          AND a.state = 'running'
          AND a.lease_token = p_lease_token
          AND a.worker_login = session_user
          AND a.worker_id = p_worker_id
        RETURNING a.id, a.run_id, a.updated_at_ms
    ),
    released_events AS (
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        SELECT r.run_id, r.id, 'attempt.released',
               jsonb_build_object('worker_id', p_worker_id), r.updated_at_ms
        FROM released AS r
        ORDER BY r.id
        RETURNING ev.id
    )
    SELECT r.id FROM released AS r ORDER BY r.id;
END
$$;

-- 8. Abandon -------------------------------------------------------------------------------------

-- A running attempt whose lease expired by the database clock (its worker died, or lost the
-- database for longer than its lease) becomes abandoned at the database time, and its successor
-- is queued while max_attempts allows, not before the later of that time + the retry backoff and
-- the old lease's expiry + ql3.attempt_successor_grace_ms(): the old worker may still be killing
-- its command. Both events are appended. Any worker login may do this for any worker: expiry is
-- decided by the database clock, not by who asks. The expiry is read again under the row lock
-- (READ COMMITTED rechecks the WHERE), so a lease renewed a moment ago is left alone; SKIP LOCKED
-- keeps workers from waiting on each other, and each expired attempt is abandoned once.
CREATE FUNCTION ql3.worker_abandon_expired_attempts_v1(p_batch_limit integer)
RETURNS TABLE (
    attempt_id bigint,
    run_id bigint,
    attempt_number integer,
    worker_id text,
    lease_expired_at_ms bigint,
    abandoned_at_ms bigint,
    next_attempt_id bigint,
    next_not_before_ms bigint
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    PERFORM ql3.worker_check_limit_v1(p_batch_limit);
    RETURN QUERY
    WITH expired AS (
        SELECT a.id, a.lease_expires_at_ms
        FROM ql3.attempts AS a
        WHERE a.state = 'running' AND a.lease_expires_at_ms <= v_now_ms
        ORDER BY a.lease_expires_at_ms, a.id
        LIMIT p_batch_limit
        FOR UPDATE OF a SKIP LOCKED
    ),
    abandoned AS (
        UPDATE ql3.attempts AS a
        SET state = 'abandoned',
            finished_at_ms = greatest(a.updated_at_ms, v_now_ms),
            updated_at_ms = greatest(a.updated_at_ms, v_now_ms),
            lease_token = NULL,
            lease_expires_at_ms = NULL
        FROM expired AS x
        WHERE a.id = x.id
        RETURNING a.id, a.run_id, a.attempt_number, a.worker_id, a.finished_at_ms,
                  x.lease_expires_at_ms AS lease_expired_at_ms
    ),
    successor AS (
        INSERT INTO ql3.attempts AS n (
            run_id, attempt_number, state, not_before_ms, created_at_ms, updated_at_ms
        )
        SELECT b.run_id, b.attempt_number + 1, 'queued',
               greatest(b.finished_at_ms + k.retry_backoff_ms,
                        b.lease_expired_at_ms + ql3.attempt_successor_grace_ms()),
               b.finished_at_ms, b.finished_at_ms
        FROM abandoned AS b
        JOIN ql3.runs AS r ON r.id = b.run_id
        JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE b.attempt_number < k.max_attempts
        RETURNING n.id, n.run_id, n.not_before_ms, n.created_at_ms
    ),
    state_events AS (
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        SELECT e.run_id, e.attempt_id, e.kind, e.payload, e.created_at_ms
        FROM (
            SELECT b.run_id, b.id AS attempt_id, 1 AS position, 'attempt.abandoned' AS kind,
                   jsonb_build_object('worker_id', b.worker_id,
                                      'lease_expired_at_ms', b.lease_expired_at_ms,
                                      'retried', s.id IS NOT NULL) AS payload,
                   b.finished_at_ms AS created_at_ms
            FROM abandoned AS b
            LEFT JOIN successor AS s ON s.run_id = b.run_id
            UNION ALL
            SELECT s.run_id, s.id, 2, 'attempt.queued',
                   jsonb_build_object('not_before_ms', s.not_before_ms,
                                      'after_attempt_id', b.id, 'after', 'abandoned'),
                   s.created_at_ms
            FROM successor AS s
            JOIN abandoned AS b ON b.run_id = s.run_id
        ) AS e
        ORDER BY e.run_id, e.position
        RETURNING ev.id
    )
    SELECT b.id, b.run_id, b.attempt_number, b.worker_id, b.lease_expired_at_ms,
           b.finished_at_ms, s.id, s.not_before_ms
    FROM abandoned AS b
    LEFT JOIN successor AS s ON s.run_id = b.run_id
    ORDER BY b.id;
END
$$;

-- 9. Events a task adds --------------------------------------------------------------------------

-- Append one event, at the database time, to the history of an attempt this login holds under
-- the token (running), e.g. a task's progress. The kinds of the run's and attempts' own story
-- (run.*, attempt.*) are written only by the transitions above, so `ql3 verify` can trust them;
-- the payload must be a JSON object. Nothing is appended for an attempt that is not held so.
CREATE FUNCTION ql3.worker_append_event_v1(
    p_run_id bigint,
    p_attempt_id bigint,
    p_lease_token uuid,
    p_kind text,
    p_payload jsonb
) RETURNS TABLE (id bigint, created_at_ms bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    IF p_lease_token IS NULL THEN
        PERFORM ql3.worker_refuse_v1('lease_token', 'must be given', NULL);
    END IF;
    IF p_kind IS NULL OR length(p_kind) NOT BETWEEN 1 AND 100 OR p_kind ~ '^(run|attempt)\.' THEN
        PERFORM ql3.worker_refuse_v1(
            'kind', '1..100 characters, not in the run. or attempt. namespaces',
            quote_nullable(p_kind));
    END IF;
    IF p_payload IS NULL OR jsonb_typeof(p_payload) <> 'object' OR length(p_payload::text) > 4096
    THEN
        PERFORM ql3.worker_refuse_v1(
            'payload', 'must be a JSON object of at most 4096 characters',
            left(quote_nullable(p_payload::text), 100));
    END IF;
    RETURN QUERY
    WITH held AS (
        SELECT a.id, a.run_id, greatest(a.updated_at_ms, v_now_ms) AS at_ms
        FROM ql3.attempts AS a
        WHERE a.id = p_attempt_id
          AND a.run_id = p_run_id
          AND a.state = 'running'
          AND a.lease_token = p_lease_token
          AND a.worker_login = session_user
        FOR SHARE
    )
    INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
    SELECT h.run_id, h.id, p_kind, p_payload, h.at_ms
    FROM held AS h
    RETURNING ev.id, ev.created_at_ms;
END
$$;

-- 10. Grants -------------------------------------------------------------------------------------

-- The worker role writes through the functions only; it keeps reading what it runs.
REVOKE UPDATE (state, updated_at_ms, worker_id, lease_token, lease_expires_at_ms, started_at_ms,
               finished_at_ms, exit_code, output_tail)
    ON ql3.attempts FROM ql3_worker_ingress;
REVOKE INSERT (run_id, attempt_number, state, not_before_ms, created_at_ms, updated_at_ms)
    ON ql3.attempts FROM ql3_worker_ingress;
REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ql3.attempts, ql3.events FROM ql3_worker_ingress;

REVOKE ALL ON FUNCTION
    ql3.attempt_successor_grace_ms(),
    ql3.worker_refuse_v1(text, text, text),
    ql3.worker_check_lease_v1(uuid, bigint),
    ql3.worker_check_limit_v1(integer),
    ql3.worker_take_attempts_v1(text, uuid, bigint, integer, text[], boolean),
    ql3.worker_renew_leases_v1(uuid, bigint[], bigint),
    ql3.worker_finish_attempt_v1(bigint, uuid, text, integer, text),
    ql3.worker_release_attempts_v1(text, uuid, bigint[]),
    ql3.worker_abandon_expired_attempts_v1(integer),
    ql3.worker_append_event_v1(bigint, bigint, uuid, text, jsonb)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    ql3.worker_take_attempts_v1(text, uuid, bigint, integer, text[], boolean),
    ql3.worker_renew_leases_v1(uuid, bigint[], bigint),
    ql3.worker_finish_attempt_v1(bigint, uuid, text, integer, text),
    ql3.worker_release_attempts_v1(text, uuid, bigint[]),
    ql3.worker_abandon_expired_attempts_v1(integer),
    ql3.worker_append_event_v1(bigint, bigint, uuid, text, jsonb)
    TO ql3_worker_ingress;
-- A constant every role may read (status, verify and the tests compare it).
GRANT EXECUTE ON FUNCTION ql3.attempt_successor_grace_ms()
    TO ql3_admin, ql3_runtime, ql3_worker_ingress;
