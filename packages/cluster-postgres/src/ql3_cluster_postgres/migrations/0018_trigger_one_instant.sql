-- Schema version 18: two triggers of one request sent at the same database millisecond admit one
-- Run, and neither call fails.
--
-- `ql3.admin_trigger_run_v1` (migration 0008) inserted the manual Run with
-- `ON CONFLICT (request_id) DO NOTHING`. A manual Run's row has a second unique key,
-- `runs_occurrence_unique` (schedule, instant, request id), and PostgreSQL settles a conflict
-- quietly only on the index a conflict target names: on any other unique index the insert waits
-- for the other session and then fails. Two sessions sending one request id (a retry after a lost
-- COMMIT reply beside a twin) read the same millisecond often enough, and when both passed the
-- request id's check before either had inserted, the second failed with a unique violation on
-- `runs_occurrence_unique`, which the CLI reported as a reused request id. Found by the chaos
-- scenario of lost trigger replies; reproduced with a frozen database clock, four sessions sending
-- each of 200 requests together: 10 to 33 of the 800 calls failed.
--
-- The function is restated whole with one change: its insert has no conflict target, so a conflict
-- on either key inserts nothing and the Run is read back by request id, as for the request id's
-- own conflict. Both keys hold the request id (NULLs are distinct in `runs_request_unique`, and a
-- manual Run's request id is never NULL), so a row it meets on either key answers this request;
-- the request id and payload checks that follow refuse a reuse for anything else, as before.
-- Signature, owner, SECURITY DEFINER, grants (kept by CREATE OR REPLACE) and every other decision
-- are unchanged; no row changes.

CREATE OR REPLACE FUNCTION ql3.admin_trigger_run_v1(
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
        -- No conflict target: whichever key a racing session's row meets this one on, the
        -- request id or the occurrence key (which holds the request id), nothing is inserted.
        ON CONFLICT DO NOTHING
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
