-- QL3 schema, version 10: pause with a reason, resume with a replay choice, pause after failures.
-- A pause is a recorded span (ql3.schedule_pauses): who paused (session_user), when (the database
-- clock), why, until when, and the first occurrence it held back (the cursor it kept). Its resume
-- closes the span: when, by whom, the replay chosen, automatic or not, and the instant the span
-- ends. The span's occurrences that the replay does not admit become ONE skip record of reason
-- `paused` (DESIGN §7): `skip` admits none, `fire_once` the latest, `catch_up` all. A pause with an
-- until is resumed by the running Coordinators once the database clock reaches it, replaying
-- nothing. A schedule with pause_after_failures N pauses itself, by the database, when its N latest
-- finished Runs all failed with their attempts exhausted.
-- Every write goes through SECURITY DEFINER functions that read the database clock once: ql3_admin
-- and ql3_runtime gain no INSERT or UPDATE on the new table, and the worker role gains nothing.

-- 1. The spans ----------------------------------------------------------------------------------

CREATE TABLE ql3.schedule_pauses (
    id              bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id     bigint  NOT NULL,
    paused_at_ms    bigint  NOT NULL,
    paused_by       text    NOT NULL,
    reason          text,
    until_ms        bigint,
    -- The schedule's cursor when it paused: the first occurrence the pause held back.
    first_held_ms   bigint,
    -- 'admin': an operator (or a schedule file) paused it; 'failures': the database did, after
    -- failure_threshold consecutive failed Runs, the last of them last_failed_run_id.
    cause           text    NOT NULL DEFAULT 'admin',
    failure_threshold  integer,
    last_failed_run_id bigint,
    resumed_at_ms   bigint,
    resumed_by      text,
    replay          text,
    automatic       boolean,
    -- Where the span ends: the resume's database time, or until_ms for an automatic resume.
    end_ms          bigint,
    skipped_count   bigint,
    CONSTRAINT schedule_pauses_cause CHECK (cause IN ('admin', 'failures')),
    CONSTRAINT schedule_pauses_failures CHECK (
        (cause = 'failures') = (failure_threshold IS NOT NULL AND last_failed_run_id IS NOT NULL)
    ),
    CONSTRAINT schedule_pauses_reason_length CHECK (reason IS NULL OR length(reason) <= 500),
    CONSTRAINT schedule_pauses_until CHECK (until_ms IS NULL OR until_ms > paused_at_ms),
    CONSTRAINT schedule_pauses_replay CHECK (replay IN ('skip', 'fire_once', 'catch_up')),
    CONSTRAINT schedule_pauses_resumed CHECK (
        (resumed_at_ms IS NULL) = (resumed_by IS NULL)
        AND (resumed_at_ms IS NULL) = (replay IS NULL)
        AND (resumed_at_ms IS NULL) = (automatic IS NULL)
        AND (resumed_at_ms IS NULL) = (end_ms IS NULL)
        AND (resumed_at_ms IS NULL) = (skipped_count IS NULL)
    ),
    CONSTRAINT schedule_pauses_order CHECK (
        resumed_at_ms IS NULL OR (resumed_at_ms >= paused_at_ms AND end_ms <= resumed_at_ms)
    ),
    -- An automatic resume ends the span at its until and replays nothing.
    CONSTRAINT schedule_pauses_automatic CHECK (
        automatic IS NOT TRUE OR (end_ms = until_ms AND replay = 'skip')
    )
);

-- One open span per schedule.
CREATE UNIQUE INDEX schedule_pauses_open ON ql3.schedule_pauses (schedule_id)
    WHERE resumed_at_ms IS NULL;
-- What the Coordinators probe each idle poll: open spans with an until, by until.
CREATE INDEX schedule_pauses_until ON ql3.schedule_pauses (until_ms)
    WHERE resumed_at_ms IS NULL AND until_ms IS NOT NULL;

-- Schedules paused before this schema get an open span (no reason, no until) so every paused
-- schedule has exactly one.
INSERT INTO ql3.schedule_pauses (schedule_id, paused_at_ms, paused_by, reason, first_held_ms)
SELECT s.id, s.updated_at_ms, current_user, 'paused before schema 10', s.next_due_at_ms
FROM ql3.trigger_schedules AS s
WHERE s.state = 'paused';

ALTER TABLE ql3.trigger_schedules
    ADD COLUMN pause_after_failures integer,
    ADD CONSTRAINT trigger_schedules_pause_after_failures
        CHECK (pause_after_failures IS NULL OR pause_after_failures BETWEEN 1 AND 1000);

-- 2. Skip records of reason `paused` ------------------------------------------------------------

-- The final list of reasons (written the same by every migration that adds one, so the order in
-- which they are applied does not matter).
ALTER TABLE ql3.skipped_occurrences
    DROP CONSTRAINT skipped_occurrences_reason,
    ADD CONSTRAINT skipped_occurrences_reason
        CHECK (reason IN ('misfire', 'zone_rules_changed', 'overlap', 'paused')),
    ADD COLUMN pause_id bigint,
    -- A resume passed them, not a claim or a policy; each had fallen due when it was written.
    ADD CONSTRAINT skipped_occurrences_paused CHECK (
        (reason = 'paused') = (pause_id IS NOT NULL)
        AND (reason <> 'paused'
             OR (misfire_policy IS NULL AND claim_acquired_at_ms IS NULL AND owner_id IS NULL
                 AND claim_token IS NULL AND last_skipped_ms <= created_at_ms))
    );

-- 3. Pause ---------------------------------------------------------------------------------------

-- Pause the schedule whose task is p_schedule (an active one; a paused one is returned as it is,
-- existed = true). p_until_ms is an instant; p_until_after_ms a duration added to the database
-- clock's now (never a node's); at most one of them. Refuses, writing nothing: 22023 an until not
-- after the database time, a negative duration, both given, or a reason over 500 characters
-- (message names the argument and its value); P0002 an unknown schedule; 55000 a schedule in
-- another state (DETAIL: the state). The row is locked and its version bumped, so a claim held
-- across the pause cannot commit (its exact-claim fence fails): the cursor kept is the first
-- occurrence nobody decided.
CREATE FUNCTION ql3.admin_pause_v1(
    p_schedule text,
    p_reason text,
    p_until_ms bigint,
    p_until_after_ms bigint
) RETURNS TABLE (pause_id bigint, paused_at_ms bigint, until_ms bigint, existed boolean)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint;
    v_id bigint;
    v_state text;
    v_cursor bigint;
    v_until bigint;
    v_pause ql3.schedule_pauses%ROWTYPE;
BEGIN
    IF p_until_ms IS NOT NULL AND p_until_after_ms IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('until: give an instant or a duration, not both, got %s and %s ms',
                             p_until_ms, p_until_after_ms);
    END IF;
    IF p_until_after_ms IS NOT NULL AND p_until_after_ms <= 0 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('until: a duration must be positive, got %s ms', p_until_after_ms);
    END IF;
    IF p_reason IS NOT NULL AND length(p_reason) > 500 THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('reason: at most 500 characters, got %s', length(p_reason));
    END IF;
    SELECT s.id, s.state, s.next_due_at_ms INTO v_id, v_state, v_cursor
        FROM ql3.trigger_schedules AS s JOIN ql3.tasks AS k ON k.id = s.task_id
        WHERE k.name = p_schedule
        FOR UPDATE OF s;
    IF v_id IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'no_data_found',
            MESSAGE = format('schedule: no such schedule, got %s', quote_nullable(p_schedule));
    END IF;
    -- Read after the lock: a commit that landed before it moved the cursor already.
    v_now_ms := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    IF v_state = 'paused' THEN
        SELECT * INTO v_pause FROM ql3.schedule_pauses AS p
            WHERE p.schedule_id = v_id AND p.resumed_at_ms IS NULL;
        IF v_pause.id IS NOT NULL THEN
            RETURN QUERY SELECT v_pause.id, v_pause.paused_at_ms, v_pause.until_ms, true;
            RETURN;
        END IF;
    ELSIF v_state <> 'active' THEN
        RAISE EXCEPTION USING ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('schedule %s: cannot pause a schedule in state %s',
                             quote_literal(p_schedule), quote_literal(v_state)),
            DETAIL = v_state;
    END IF;
    v_until := coalesce(p_until_ms, v_now_ms + p_until_after_ms);
    IF v_until IS NOT NULL AND v_until <= v_now_ms THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('until: must be after the database time %s (epoch ms), got %s',
                             v_now_ms, v_until);
    END IF;
    -- A span left open by a schedule retired while paused ends where it was left.
    UPDATE ql3.schedule_pauses AS p
        SET resumed_at_ms = greatest(p.paused_at_ms, v_now_ms), resumed_by = session_user,
            replay = 'skip', automatic = false, end_ms = p.paused_at_ms, skipped_count = 0
        WHERE p.schedule_id = v_id AND p.resumed_at_ms IS NULL;
    INSERT INTO ql3.schedule_pauses AS p (
        schedule_id, paused_at_ms, paused_by, reason, until_ms, first_held_ms
    )
    VALUES (v_id, v_now_ms, session_user, p_reason, v_until, v_cursor)
    RETURNING * INTO v_pause;
    UPDATE ql3.trigger_schedules AS s
        SET state = 'paused', version = s.version + 1,
            updated_at_ms = CASE WHEN s.claim_token IS NULL
                                 THEN greatest(s.updated_at_ms, v_now_ms) ELSE s.updated_at_ms END
        WHERE s.id = v_id;
    PERFORM pg_notify('ql3_schedule_changed', 'paused');
    RETURN QUERY SELECT v_pause.id, v_pause.paused_at_ms, v_pause.until_ms, false;
END
$$;

-- 4. Resume ------------------------------------------------------------------------------------

-- Close schedule p_schedule_id's open span at p_end_ms with replay p_replay; write one `paused`
-- skip record [p_first_ms, p_last_ms] of p_count occurrences (none when p_count = 0), and set the
-- schedule's cursor and state (p_state 'active' or 'exhausted'). The caller computed the
-- occurrences with the schedule's cron and the zone rules p_zone_rules_version, from the cursor
-- p_cursor_seen; everything is re-checked here in the caller's transaction, with the row locked:
-- the span is still open, the schedule is paused with that cursor, those rules are the recorded
-- ones, and the span's end has come by the database clock (a manual resume ends it at most at now;
-- an automatic one exactly at its until, which must have passed). Returns false and writes nothing
-- when the span is already closed or the schedule moved (a racing resume won): one resume, one
-- record. Refuses (22023) arguments that contradict each other.
CREATE FUNCTION ql3.resume_pause_v1(
    p_schedule_id bigint,
    p_cursor_seen bigint,
    p_end_ms bigint,
    p_first_ms bigint,
    p_last_ms bigint,
    p_count bigint,
    p_next_cursor_ms bigint,
    p_state text,
    p_replay text,
    p_automatic boolean,
    p_zone_rules_version text
) RETURNS boolean
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
DECLARE
    v_now_ms bigint;
    v_pause ql3.schedule_pauses%ROWTYPE;
    v_state text;
    v_cursor bigint;
    v_claimed boolean;
BEGIN
    IF p_replay IS NULL OR p_replay NOT IN ('skip', 'fire_once', 'catch_up')
       OR p_state IS NULL OR p_state NOT IN ('active', 'exhausted')
       OR (p_state = 'active') <> (p_next_cursor_ms IS NOT NULL)
       OR p_count IS NULL OR p_count < 0
       OR (p_count = 0) <> (p_first_ms IS NULL OR p_last_ms IS NULL)
       OR (p_count > 0 AND (p_first_ms > p_last_ms OR p_last_ms > p_end_ms
                            OR p_first_ms < p_cursor_seen))
       OR (p_count > 0 AND p_next_cursor_ms IS NOT NULL AND p_next_cursor_ms <= p_last_ms)
       OR (p_automatic AND p_replay <> 'skip') THEN
        RAISE EXCEPTION USING ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('resume: inconsistent arguments (replay %s, state %s, cursor %s,'
                             ' range %s..%s of %s, end %s)', p_replay, p_state, p_next_cursor_ms,
                             p_first_ms, p_last_ms, p_count, p_end_ms);
    END IF;
    PERFORM 1 FROM ql3.zone_rules AS z WHERE z.version = p_zone_rules_version FOR KEY SHARE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    SELECT s.state, s.next_due_at_ms, s.claim_token IS NOT NULL INTO v_state, v_cursor, v_claimed
        FROM ql3.trigger_schedules AS s WHERE s.id = p_schedule_id FOR UPDATE;
    SELECT * INTO v_pause FROM ql3.schedule_pauses AS p
        WHERE p.schedule_id = p_schedule_id AND p.resumed_at_ms IS NULL
        FOR UPDATE;
    v_now_ms := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    IF v_pause.id IS NOT NULL AND v_state IS DISTINCT FROM 'paused' AND p_automatic
       AND v_pause.until_ms = p_end_ms AND p_end_ms <= v_now_ms THEN
        -- A span left open by a schedule retired (or redefined) while paused: it ends at its
        -- until, having recorded nothing, and is never probed again.
        UPDATE ql3.schedule_pauses AS p
            SET resumed_at_ms = greatest(v_now_ms, p.paused_at_ms), resumed_by = session_user,
                replay = 'skip', automatic = true, end_ms = p_end_ms, skipped_count = 0
            WHERE p.id = v_pause.id;
        RETURN false;
    END IF;
    IF v_pause.id IS NULL OR v_state IS DISTINCT FROM 'paused'
       OR v_cursor IS DISTINCT FROM p_cursor_seen OR p_end_ms > v_now_ms
       OR (p_automatic AND (v_pause.until_ms IS NULL OR p_end_ms <> v_pause.until_ms)) THEN
        RETURN false;
    END IF;
    IF p_count > 0 THEN
        INSERT INTO ql3.skipped_occurrences (
            schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, reason, pause_id,
            created_at_ms
        )
        VALUES (p_schedule_id, p_first_ms, p_last_ms, p_count, 'paused', v_pause.id, v_now_ms);
    END IF;
    -- Never a time before the pause's own (the database clock may have stepped back since): the
    -- span then ends where it began, and holds what the caller found due up to its clock.
    UPDATE ql3.schedule_pauses AS p
        SET resumed_at_ms = greatest(v_now_ms, p.paused_at_ms), resumed_by = session_user,
            replay = p_replay, automatic = p_automatic,
            end_ms = greatest(p_end_ms, p.paused_at_ms), skipped_count = p_count
        WHERE p.id = v_pause.id;
    UPDATE ql3.trigger_schedules AS s
        SET state = p_state, next_due_at_ms = p_next_cursor_ms, version = s.version + 1,
            updated_at_ms = CASE WHEN s.claim_token IS NULL
                                 THEN greatest(s.updated_at_ms, v_now_ms) ELSE s.updated_at_ms END
        WHERE s.id = p_schedule_id;
    PERFORM pg_notify('ql3_schedule_changed', 'resumed');
    RETURN true;
END
$$;

-- 5. Pause after failures -----------------------------------------------------------------------

-- Fired only when an attempt ends failed, timed_out or abandoned (never by a commit, which only
-- inserts attempts): if it was its Run's last allowed attempt and the schedule asks to pause after
-- N failures, and the schedule's N latest Runs to reach an outcome all failed (ordered by when
-- their outcome was recorded), the schedule is paused by the database with the reason recorded.
CREATE FUNCTION ql3.pause_after_failures_v1() RETURNS trigger
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
DECLARE
    v_schedule_id bigint;
    v_max integer;
    v_threshold integer;
    v_state text;
    v_failed bigint;
    v_latest_run_id bigint;
    v_now_ms bigint;
BEGIN
    SELECT r.schedule_id, k.max_attempts INTO v_schedule_id, v_max
        FROM ql3.runs AS r JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE r.id = NEW.run_id;
    IF v_schedule_id IS NULL OR NEW.attempt_number < v_max THEN
        RETURN NULL;
    END IF;
    SELECT s.pause_after_failures INTO v_threshold
        FROM ql3.trigger_schedules AS s WHERE s.id = v_schedule_id;
    IF v_threshold IS NULL THEN
        RETURN NULL;
    END IF;
    -- Locked before its state is read: two Runs failing at once pause it once, the second
    -- finding it paused already.
    SELECT s.state INTO v_state
        FROM ql3.trigger_schedules AS s WHERE s.id = v_schedule_id FOR UPDATE;
    IF v_state <> 'active' THEN
        RETURN NULL;
    END IF;
    -- The Run named is the latest of the ones counted, in the order verify reads them back: the
    -- attempt whose update fired this is not always it (two finishes read the clock in one order
    -- and commit in the other).
    SELECT count(*) FILTER (WHERE o.state <> 'succeeded'),
           (array_agg(o.run_id ORDER BY o.updated_at_ms DESC, o.id DESC))[1]
        INTO v_failed, v_latest_run_id
    FROM (
        SELECT a.id, a.run_id, a.state, a.updated_at_ms
        FROM ql3.attempts AS a
        JOIN ql3.runs AS r ON r.id = a.run_id
        JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE r.schedule_id = v_schedule_id
          AND (a.state = 'succeeded'
               OR (a.state IN ('failed', 'timed_out', 'abandoned')
                   AND a.attempt_number >= k.max_attempts))
        ORDER BY a.updated_at_ms DESC, a.id DESC
        LIMIT v_threshold
    ) AS o
    HAVING count(*) = v_threshold;
    IF v_failed IS DISTINCT FROM v_threshold::bigint THEN
        RETURN NULL;
    END IF;
    v_now_ms := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    UPDATE ql3.schedule_pauses AS p
        SET resumed_at_ms = greatest(p.paused_at_ms, v_now_ms), resumed_by = session_user,
            replay = 'skip', automatic = false, end_ms = p.paused_at_ms, skipped_count = 0
        WHERE p.schedule_id = v_schedule_id AND p.resumed_at_ms IS NULL;
    INSERT INTO ql3.schedule_pauses (
        schedule_id, paused_at_ms, paused_by, reason, first_held_ms, cause, failure_threshold,
        last_failed_run_id
    )
    SELECT s.id, v_now_ms, session_user,
           format('%s consecutive failed runs, last run %s', v_threshold, v_latest_run_id),
           s.next_due_at_ms, 'failures', v_threshold, v_latest_run_id
    FROM ql3.trigger_schedules AS s WHERE s.id = v_schedule_id;
    UPDATE ql3.trigger_schedules AS s
        SET state = 'paused', version = s.version + 1,
            updated_at_ms = CASE WHEN s.claim_token IS NULL
                                 THEN greatest(s.updated_at_ms, v_now_ms) ELSE s.updated_at_ms END
        WHERE s.id = v_schedule_id;
    PERFORM pg_notify('ql3_schedule_changed', 'paused');
    RETURN NULL;
END
$$;

CREATE TRIGGER attempts_pause_after_failures
    AFTER UPDATE OF state ON ql3.attempts
    FOR EACH ROW
    WHEN (NEW.state IN ('failed', 'timed_out', 'abandoned') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION ql3.pause_after_failures_v1();

-- 6. Grants -------------------------------------------------------------------------------------

-- Everyone who reads history reads the spans; only the functions write them.
GRANT SELECT ON ql3.schedule_pauses TO ql3_admin, ql3_runtime;
-- The admin sets the threshold with the definition (create and apply).
GRANT UPDATE (pause_after_failures) ON ql3.trigger_schedules TO ql3_admin;
REVOKE ALL ON FUNCTION ql3.admin_pause_v1(text, text, bigint, bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.admin_pause_v1(text, text, bigint, bigint) TO ql3_admin;
REVOKE ALL ON FUNCTION ql3.resume_pause_v1(
    bigint, bigint, bigint, bigint, bigint, bigint, bigint, text, text, boolean, text
) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.resume_pause_v1(
    bigint, bigint, bigint, bigint, bigint, bigint, bigint, text, text, boolean, text
) TO ql3_admin, ql3_runtime;
REVOKE ALL ON FUNCTION ql3.pause_after_failures_v1() FROM PUBLIC;
