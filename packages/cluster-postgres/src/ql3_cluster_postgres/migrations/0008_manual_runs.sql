-- QL3 schema, version 8: manual Runs ("trigger now"). An admin asks for one Run of a schedule now;
-- it is executed by workers like any admitted Run (a queued first attempt of the schedule's task),
-- but it is its own kind in the history: it never fills, takes or disturbs an occurrence of the
-- cron series, and `ql3 verify` accounts for it apart (DESIGN §7, §14).
--
-- A manual Run is a row of ql3.runs, so workers take its attempts exactly as they take any other
-- (0007's functions are unchanged). It differs from a cron Run in three columns:
-- kind 'manual', the request id that makes the trigger idempotent (one Run per request, whatever
-- is retried), and the payload the admin gave (NULL: the task's template, as for cron Runs).
-- Its owner_id is the login that asked, its claim_token a fresh uuid that no claim ever held, and
-- scheduled_for_ms = created_at_ms = the one database clock observation of the trigger (rule
-- zero: no time is a parameter).
--
-- The Coordinator's commit names neither column: every run it writes is 'cron' with no request.

-- 1. The kind of a Run --------------------------------------------------------------------------

ALTER TABLE ql3.runs
    ADD COLUMN kind       text NOT NULL DEFAULT 'cron',
    ADD COLUMN request_id text,
    ADD COLUMN payload    jsonb,
    ADD CONSTRAINT runs_kind CHECK (kind IN ('cron', 'manual')),
    -- A manual Run, and only one, answers a request; only it may carry its own payload.
    ADD CONSTRAINT runs_manual_request CHECK (
        (kind = 'manual') = (request_id IS NOT NULL)
        AND (kind = 'manual' OR payload IS NULL)
    ),
    -- The shape the CLI and ql3.admin_trigger_run_v1 accept (ql3_runtime_core has no copy).
    ADD CONSTRAINT runs_request_id_shape
        CHECK (request_id IS NULL OR request_id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    -- ql3_runtime_core.PAYLOAD_MAX_BYTES: a command receives the payload in its environment.
    ADD CONSTRAINT runs_payload_shape CHECK (
        payload IS NULL
        OR (jsonb_typeof(payload) = 'object' AND octet_length(payload::text) <= 65536)
    ),
    -- One Run per request, for ever: the durable idempotency fact of a trigger.
    ADD CONSTRAINT runs_request_unique UNIQUE (request_id);

-- 2. One Run per occurrence, for cron Runs only -------------------------------------------------

-- The same constraint name, so the commit's `ON CONFLICT ON CONSTRAINT runs_occurrence_unique`
-- keeps its meaning: for a cron Run (request_id NULL, and NULLs equal here) the key is exactly the
-- occurrence (schedule, instant) as before; a manual Run carries its unique request id in the key,
-- so one admitted at the very millisecond of an occurrence never takes that occurrence's place.
ALTER TABLE ql3.runs
    DROP CONSTRAINT runs_occurrence_unique,
    ADD CONSTRAINT runs_occurrence_unique
        UNIQUE NULLS NOT DISTINCT (schedule_id, scheduled_for_ms, request_id);

-- 3. The trigger --------------------------------------------------------------------------------

-- Admit one manual Run of schedule p_schedule (its task's name) for request p_request_id, with
-- payload p_payload (NULL: the task's template at execution), at the database time; or return the
-- Run already admitted for that request (existed = true). Refuses, writing nothing:
-- 22023 a malformed request id or payload (message names the argument and its value),
-- P0002 an unknown schedule, 55000 a retired or quarantined (invalid) schedule (DETAIL: the
-- state), 23505 a request id already used for another schedule or another payload.
-- Paused and exhausted schedules are admitted: the operator asked for this one Run explicitly;
-- pausing stops the cron series, not a Run asked for by name.
-- The schedule row is read, never locked or written: a Coordinator's claim and commit on it are
-- not disturbed (its exact-claim fence does not see a trigger). Two sessions racing one request
-- id meet on runs_request_unique: the second waits for the first, inserts nothing, and reads the
-- first one's Run back (READ COMMITTED: each statement of the function takes a new snapshot).
CREATE FUNCTION ql3.admin_trigger_run_v1(
    p_schedule text,
    p_request_id text,
    p_payload jsonb
) RETURNS TABLE (
    run_id bigint,
    attempt_id bigint,
    schedule_id bigint,
    task_id bigint,
    schedule_name text,
    request_id text,
    scheduled_for_ms bigint,
    created_at_ms bigint,
    payload jsonb,
    requested_by text,
    existed boolean
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_schedule_id bigint;
    v_task_id bigint;
    v_state text;
    v_run ql3.runs%ROWTYPE;
    v_attempt_id bigint;
    v_existed boolean := false;
BEGIN
    IF p_request_id IS NULL OR p_request_id !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('request_id: must be 1..128 of A-Z a-z 0-9 . _ : - starting with a'
                             ' letter or digit, got %s', left(quote_nullable(p_request_id), 140));
    END IF;
    IF p_payload IS NOT NULL
       AND (jsonb_typeof(p_payload) <> 'object' OR octet_length(p_payload::text) > 65536) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('payload: must be a JSON object of at most 65536 bytes, got %s',
                             left(p_payload::text, 100));
    END IF;
    SELECT s.id, s.task_id, s.state INTO v_schedule_id, v_task_id, v_state
        FROM ql3.trigger_schedules AS s
        JOIN ql3.tasks AS k ON k.id = s.task_id
        WHERE k.name = p_schedule;
    IF v_schedule_id IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'no_data_found',
            MESSAGE = format('schedule: no such schedule, got %s', quote_nullable(p_schedule));
    END IF;
    SELECT * INTO v_run FROM ql3.runs AS r WHERE r.request_id = p_request_id;
    IF v_run.id IS NULL THEN
        IF v_state IN ('retired', 'invalid') THEN
            RAISE EXCEPTION USING
                ERRCODE = 'object_not_in_prerequisite_state',
                MESSAGE = format('schedule %s: cannot trigger a schedule in state %s',
                                 quote_literal(p_schedule), quote_literal(v_state)),
                DETAIL = v_state;
        END IF;
        INSERT INTO ql3.runs AS r (
            schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms, kind,
            request_id, payload
        )
        VALUES (v_schedule_id, v_task_id, v_now_ms, session_user, gen_random_uuid(), v_now_ms,
                'manual', p_request_id, p_payload)
        ON CONFLICT (request_id) DO NOTHING
        RETURNING * INTO v_run;
        IF v_run.id IS NULL THEN
            -- A racing session committed this request first: its Run is the answer.
            SELECT * INTO v_run FROM ql3.runs AS r WHERE r.request_id = p_request_id;
            v_existed := true;
        ELSE
            INSERT INTO ql3.attempts AS a (
                run_id, attempt_number, state, created_at_ms, updated_at_ms
            )
            VALUES (v_run.id, 1, 'queued', v_now_ms, v_now_ms)
            RETURNING a.id INTO v_attempt_id;
            -- The admission events of a commit, in its order (DESIGN §5).
            INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
            VALUES (v_run.id, v_attempt_id, 'run.admitted',
                    jsonb_build_object('kind', 'manual', 'request_id', p_request_id), v_now_ms),
                   (v_run.id, v_attempt_id, 'attempt.queued', '{}'::jsonb, v_now_ms);
            PERFORM pg_notify('ql3_run_admitted', v_run.id::text);
        END IF;
    ELSE
        v_existed := true;
    END IF;
    IF v_existed THEN
        IF v_run.schedule_id <> v_schedule_id
           OR v_run.payload IS DISTINCT FROM p_payload THEN
            RAISE EXCEPTION USING
                ERRCODE = 'unique_violation',
                MESSAGE = format('request_id: already used by run %s of schedule id %s with'
                                 ' payload %s, got %s for schedule %s with payload %s',
                                 v_run.id, v_run.schedule_id,
                                 left(coalesce(v_run.payload::text, 'template'), 100),
                                 quote_literal(p_request_id), quote_literal(p_schedule),
                                 left(coalesce(p_payload::text, 'template'), 100));
        END IF;
        SELECT a.id INTO v_attempt_id
            FROM ql3.attempts AS a
            WHERE a.run_id = v_run.id AND a.attempt_number = 1;
    END IF;
    RETURN QUERY SELECT v_run.id, v_attempt_id, v_run.schedule_id, v_run.task_id, p_schedule,
                        v_run.request_id, v_run.scheduled_for_ms, v_run.created_at_ms,
                        v_run.payload, v_run.owner_id, v_existed;
END
$$;

-- 4. Grants -------------------------------------------------------------------------------------

-- ql3_admin triggers through the function only: it still has no INSERT on any history table.
-- It reads runs already (0002), so it can read a request back after a lost reply.
-- ql3_runtime keeps INSERT on the columns its commit writes and no others: a manual Run is
-- written by the function alone (a Coordinator login cannot forge one).
REVOKE INSERT ON ql3.runs FROM ql3_runtime;
GRANT INSERT (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms)
    ON ql3.runs TO ql3_runtime;
REVOKE ALL ON FUNCTION ql3.admin_trigger_run_v1(text, text, jsonb) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.admin_trigger_run_v1(text, text, jsonb) TO ql3_admin;
