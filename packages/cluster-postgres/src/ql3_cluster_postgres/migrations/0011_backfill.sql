-- QL3 schema, version 11: backfill. An admin asks for the occurrences of a span that have no Run
-- (those a skip record covers, and with `--include-before-creation` those before the schedule's
-- first cursor) to be admitted after all, once each. A backfilled Run is the Run of its
-- occurrence: a row of ql3.runs with request_id NULL, so runs_occurrence_unique still keeps one
-- Run per occurrence whoever writes it; it is of kind 'backfill', names the skip record it
-- supersedes (the record stays: it is history) and the backfill request that admitted it.
-- Workers execute it like any Run (0007's functions are unchanged). DESIGN §7 says how verify
-- accounts for such an occurrence (a skip record superseded by a backfilled Run).
--
-- Written by ql3.admin_backfill_batch_v1 alone (SECURITY DEFINER, EXECUTE to ql3_admin only),
-- one batch of occurrences per call and per transaction, with one reading of the database
-- clock per call: every row a batch writes has that time (rule zero: no time is a parameter;
-- the occurrences are the identities asked for, each checked against the history).

-- 1. Backfill requests ---------------------------------------------------------------------------

-- One row per request id, for ever: what was asked (schedule, span, whether occurrences before
-- the schedule's creation count), by whom and when (database clock), and what the batches did so
-- far. A rerun with the same request id resumes it: it must ask for the same thing.
CREATE TABLE ql3.backfills (
    id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id              text    NOT NULL,
    schedule_id             bigint  NOT NULL,
    from_ms                 bigint  NOT NULL,
    to_ms                   bigint  NOT NULL,
    include_before_creation boolean NOT NULL,
    requested_by            text    NOT NULL,
    requested_at_ms         bigint  NOT NULL,
    updated_at_ms           bigint  NOT NULL,
    batches                 bigint  NOT NULL DEFAULT 0,
    admitted                bigint  NOT NULL DEFAULT 0,
    already_run             bigint  NOT NULL DEFAULT 0,
    state                   text    NOT NULL DEFAULT 'running',
    finished_at_ms          bigint,
    CONSTRAINT backfills_request_unique UNIQUE (request_id),
    -- The shape of runs_request_id_shape (migration 0008): one rule for every request id.
    CONSTRAINT backfills_request_id_shape
        CHECK (request_id ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'),
    CONSTRAINT backfills_span CHECK (from_ms <= to_ms),
    CONSTRAINT backfills_counts CHECK (batches >= 0 AND admitted >= 0 AND already_run >= 0),
    CONSTRAINT backfills_state CHECK (state IN ('running', 'done')),
    CONSTRAINT backfills_finished CHECK ((state = 'done') = (finished_at_ms IS NOT NULL)),
    CONSTRAINT backfills_times CHECK (
        updated_at_ms >= requested_at_ms
        AND (finished_at_ms IS NULL OR finished_at_ms >= requested_at_ms)
    ),
    CONSTRAINT backfills_requested_by_length CHECK (length(requested_by) BETWEEN 1 AND 128)
);

CREATE INDEX backfills_schedule ON ql3.backfills (schedule_id, id);

-- 2. Backfilled Runs -------------------------------------------------------------------------------

-- The kind CHECK gains 'backfill'; runs_manual_request (0008) still holds: a backfilled Run has
-- no request id of its own (its request is the backfills row), so it is keyed by its occurrence.
-- The two links are plain columns, no FOREIGN KEY: a foreign key queues a check per inserted
-- row, every cron Run of the Coordinator's commit included (see 0001 and 0004 on keeping runs
-- free of them); the function checks both when it writes them and `ql3 verify` (rule
-- `backfill`) checks them afterwards.
ALTER TABLE ql3.runs
    ADD COLUMN backfill_id bigint,
    ADD COLUMN supersedes_skip_id bigint,
    DROP CONSTRAINT runs_kind,
    ADD CONSTRAINT runs_kind CHECK (kind IN ('cron', 'manual', 'backfill')),
    ADD CONSTRAINT runs_backfill CHECK (
        (kind = 'backfill') = (backfill_id IS NOT NULL)
        AND (kind = 'backfill' OR supersedes_skip_id IS NULL)
    );

-- verify's `backfill` rule reads the backfilled Runs of a schedule; there are few.
CREATE INDEX runs_backfilled ON ql3.runs (schedule_id, scheduled_for_ms) WHERE kind = 'backfill';

-- 3. One batch of a backfill ------------------------------------------------------------------------

-- Admit, for request p_request_id (schedule p_schedule, span [p_from_ms, p_to_ms]), the
-- occurrences p_occurrences, each superseding skip record p_skip_ids[i] (NULL: an occurrence
-- before the schedule's first cursor, asked with p_include_before_creation). An occurrence that
-- already has a Run (a cron Run, or this or another backfill's) is counted in already_run and
-- left alone (ON CONFLICT on the occurrence). p_last marks the request done.
-- Refuses, writing nothing: 22023 a malformed request id, span or array, or an occurrence it
-- may not admit (message names `occurrence`, its value and why); P0002 an unknown schedule;
-- 55000 a retired or quarantined schedule (DETAIL: the state); 23505 a request id already used
-- for another schedule, span or flag.
-- Every occurrence must lie in the span, in the schedule's window (start_at/end_at), strictly
-- before its cursor (what is at or after it is not decided yet), at or before the database
-- clock (so runs_not_early holds: the Run is admitted late, on purpose), and be covered by the
-- skip record it names, of this schedule; or, naming none, lie before the first cursor of the
-- schedule's first revision. That it is an occurrence of the cron revision live then is what
-- the admin computed with the database's zone rules and what `ql3 verify` checks (rule
-- `backfill`); SQL cannot compute cron.
-- The backfills row is locked FOR UPDATE: two sessions sending batches of one request take
-- turns. The schedule row is read, never locked or written: a Coordinator's claim and commit on
-- it are not disturbed; an occurrence it commits meanwhile meets the backfill on
-- runs_occurrence_unique, and whichever comes second inserts nothing.
CREATE FUNCTION ql3.admin_backfill_batch_v1(
    p_schedule text,
    p_request_id text,
    p_from_ms bigint,
    p_to_ms bigint,
    p_include_before_creation boolean,
    p_occurrences bigint[],
    p_skip_ids bigint[],
    p_last boolean
) RETURNS TABLE (
    backfill_id bigint,
    schedule_id bigint,
    request_id text,
    requested_by text,
    requested_at_ms bigint,
    batch_at_ms bigint,
    admitted bigint,
    already_run bigint,
    total_admitted bigint,
    total_already_run bigint,
    batches bigint,
    state text
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_schedule ql3.trigger_schedules%ROWTYPE;
    v_first_cursor_ms bigint;
    v_backfill ql3.backfills%ROWTYPE;
    v_bad record;
    v_admitted bigint;
    v_count bigint := coalesce(cardinality(p_occurrences), 0);
BEGIN
    IF p_request_id IS NULL OR p_request_id !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('request_id: must be 1..128 of A-Z a-z 0-9 . _ : - starting with a'
                             ' letter or digit, got %s', left(quote_nullable(p_request_id), 140));
    END IF;
    IF p_from_ms IS NULL OR p_to_ms IS NULL OR p_from_ms > p_to_ms THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('from: must be at or before to, got from %s to %s',
                             quote_nullable(p_from_ms), quote_nullable(p_to_ms));
    END IF;
    IF v_count <> coalesce(cardinality(p_skip_ids), 0) OR p_include_before_creation IS NULL
       OR p_last IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('occurrences: %s occurrence(s) need as many skip ids, got %s',
                             v_count, coalesce(cardinality(p_skip_ids), 0));
    END IF;
    SELECT s.* INTO v_schedule
        FROM ql3.trigger_schedules AS s
        JOIN ql3.tasks AS k ON k.id = s.task_id
        WHERE k.name = p_schedule;
    IF v_schedule.id IS NULL THEN
        RAISE EXCEPTION USING
            ERRCODE = 'no_data_found',
            MESSAGE = format('schedule: no such schedule, got %s', quote_nullable(p_schedule));
    END IF;
    IF v_schedule.state IN ('retired', 'invalid') THEN
        RAISE EXCEPTION USING
            ERRCODE = 'object_not_in_prerequisite_state',
            MESSAGE = format('schedule %s: cannot backfill a schedule in state %s',
                             quote_literal(p_schedule), quote_literal(v_schedule.state)),
            DETAIL = v_schedule.state;
    END IF;
    INSERT INTO ql3.backfills AS b (
        request_id, schedule_id, from_ms, to_ms, include_before_creation, requested_by,
        requested_at_ms, updated_at_ms
    )
    VALUES (p_request_id, v_schedule.id, p_from_ms, p_to_ms, p_include_before_creation,
            session_user, v_now_ms, v_now_ms)
    ON CONFLICT (request_id) DO NOTHING;
    SELECT b.* INTO v_backfill FROM ql3.backfills AS b WHERE b.request_id = p_request_id
        FOR UPDATE;
    IF v_backfill.schedule_id <> v_schedule.id OR v_backfill.from_ms <> p_from_ms
       OR v_backfill.to_ms <> p_to_ms
       OR v_backfill.include_before_creation <> p_include_before_creation THEN
        RAISE EXCEPTION USING
            ERRCODE = 'unique_violation',
            MESSAGE = format('request_id: already used by backfill %s of schedule id %s over'
                             ' [%s, %s] (include_before_creation %s), got %s for schedule %s'
                             ' over [%s, %s] (include_before_creation %s)',
                             v_backfill.id, v_backfill.schedule_id, v_backfill.from_ms,
                             v_backfill.to_ms, v_backfill.include_before_creation,
                             quote_literal(p_request_id), quote_literal(p_schedule), p_from_ms,
                             p_to_ms, p_include_before_creation);
    END IF;
    -- The first cursor of the first revision: what "before the schedule's creation" means.
    SELECT v.first_cursor_ms INTO v_first_cursor_ms
        FROM ql3.schedule_revisions AS v
        WHERE v.schedule_id = v_schedule.id
        ORDER BY v.revision
        LIMIT 1;
    SELECT o.at_ms, o.skip_id,
           CASE
               WHEN o.at_ms IS NULL THEN 'is NULL'
               WHEN o.at_ms < p_from_ms OR o.at_ms > p_to_ms THEN 'lies outside the span'
               WHEN o.at_ms > v_now_ms THEN format('is after the database clock %s', v_now_ms)
               WHEN v_schedule.start_at_ms IS NOT NULL AND o.at_ms < v_schedule.start_at_ms
                   THEN format('is before the schedule''s start_at %s', v_schedule.start_at_ms)
               WHEN v_schedule.end_at_ms IS NOT NULL AND o.at_ms > v_schedule.end_at_ms
                   THEN format('is after the schedule''s end_at %s', v_schedule.end_at_ms)
               WHEN v_schedule.next_due_at_ms IS NOT NULL AND o.at_ms >= v_schedule.next_due_at_ms
                   THEN format('is at or after the schedule''s cursor %s (not decided yet)',
                               v_schedule.next_due_at_ms)
               WHEN o.skip_id IS NULL AND NOT p_include_before_creation
                   THEN 'names no skip record and include_before_creation is false'
               WHEN o.skip_id IS NULL
                    AND (v_first_cursor_ms IS NULL OR o.at_ms >= v_first_cursor_ms)
                   THEN format('names no skip record and is not before the first cursor %s',
                               coalesce(v_first_cursor_ms::text, 'NULL'))
               WHEN o.skip_id IS NOT NULL AND NOT EXISTS (
                        SELECT 1 FROM ql3.skipped_occurrences AS k
                        WHERE k.id = o.skip_id AND k.schedule_id = v_schedule.id
                          AND o.at_ms BETWEEN k.first_skipped_ms AND k.last_skipped_ms)
                   THEN format('is not covered by skip record %s of this schedule', o.skip_id)
           END AS why
        INTO v_bad
        FROM unnest(p_occurrences, p_skip_ids) AS o (at_ms, skip_id)
        WHERE o.at_ms IS NULL OR o.at_ms < p_from_ms OR o.at_ms > p_to_ms OR o.at_ms > v_now_ms
           OR (v_schedule.start_at_ms IS NOT NULL AND o.at_ms < v_schedule.start_at_ms)
           OR (v_schedule.end_at_ms IS NOT NULL AND o.at_ms > v_schedule.end_at_ms)
           OR (v_schedule.next_due_at_ms IS NOT NULL AND o.at_ms >= v_schedule.next_due_at_ms)
           OR (o.skip_id IS NULL AND (NOT p_include_before_creation
                                      OR v_first_cursor_ms IS NULL
                                      OR o.at_ms >= v_first_cursor_ms))
           OR (o.skip_id IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM ql3.skipped_occurrences AS k
                   WHERE k.id = o.skip_id AND k.schedule_id = v_schedule.id
                     AND o.at_ms BETWEEN k.first_skipped_ms AND k.last_skipped_ms))
        LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION USING
            ERRCODE = 'invalid_parameter_value',
            MESSAGE = format('occurrence: %s %s', coalesce(v_bad.at_ms::text, 'NULL'), v_bad.why);
    END IF;
    WITH admitted AS (
        INSERT INTO ql3.runs AS r (
            schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms, kind,
            backfill_id, supersedes_skip_id
        )
        SELECT v_schedule.id, v_schedule.task_id, o.at_ms, session_user, gen_random_uuid(),
               v_now_ms, 'backfill', v_backfill.id, o.skip_id
        FROM (SELECT DISTINCT ON (u.at_ms) u.at_ms, u.skip_id
              FROM unnest(p_occurrences, p_skip_ids) AS u (at_ms, skip_id)
              ORDER BY u.at_ms) AS o
        ORDER BY o.at_ms
        ON CONFLICT ON CONSTRAINT runs_occurrence_unique DO NOTHING
        RETURNING r.id
    ),
    queued AS (
        INSERT INTO ql3.attempts AS a (run_id, attempt_number, state, created_at_ms, updated_at_ms)
        SELECT ad.id, 1, 'queued', v_now_ms, v_now_ms FROM admitted AS ad
        RETURNING a.id, a.run_id
    ),
    announced AS (
        -- The admission events of a commit, in its order (DESIGN §5).
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        SELECT q.run_id, q.id, k.kind,
               CASE k.position
                   WHEN 1 THEN jsonb_build_object('kind', 'backfill', 'request_id', p_request_id)
                   ELSE '{}'::jsonb
               END,
               v_now_ms
        FROM queued AS q
        CROSS JOIN (VALUES (1, 'run.admitted'), (2, 'attempt.queued')) AS k (position, kind)
        ORDER BY q.run_id, k.position
        RETURNING ev.run_id
    )
    SELECT count(DISTINCT an.run_id) INTO v_admitted FROM announced AS an;
    IF v_admitted > 0 THEN
        PERFORM pg_notify('ql3_run_admitted', v_backfill.id::text);
    END IF;
    UPDATE ql3.backfills AS b
    SET batches = b.batches + 1,
        admitted = b.admitted + v_admitted,
        already_run = b.already_run + (
            SELECT count(DISTINCT u.at_ms) FROM unnest(p_occurrences) AS u (at_ms)
        ) - v_admitted,
        updated_at_ms = greatest(b.updated_at_ms, v_now_ms),
        state = CASE WHEN p_last THEN 'done' ELSE b.state END,
        finished_at_ms = CASE
            WHEN b.finished_at_ms IS NOT NULL THEN b.finished_at_ms
            WHEN p_last THEN greatest(b.requested_at_ms, v_now_ms)
        END
    WHERE b.id = v_backfill.id
    RETURNING b.* INTO v_backfill;
    RETURN QUERY SELECT v_backfill.id, v_backfill.schedule_id, v_backfill.request_id,
                        v_backfill.requested_by, v_backfill.requested_at_ms, v_now_ms,
                        v_admitted,
                        (SELECT count(DISTINCT u.at_ms) FROM unnest(p_occurrences) AS u (at_ms))
                            - v_admitted,
                        v_backfill.admitted, v_backfill.already_run, v_backfill.batches,
                        v_backfill.state;
END
$$;

-- 4. Grants ---------------------------------------------------------------------------------------

-- ql3_admin backfills through the function only (still no INSERT on any history table) and reads
-- the requests back (a rerun, a lost reply, verify). ql3_runtime's INSERT on runs stays the
-- commit's columns (0008): a Coordinator login cannot forge a backfilled Run.
GRANT SELECT ON ql3.backfills TO ql3_admin;
REVOKE ALL ON FUNCTION ql3.admin_backfill_batch_v1(
    text, text, bigint, bigint, boolean, bigint[], bigint[], boolean
) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.admin_backfill_batch_v1(
    text, text, bigint, bigint, boolean, bigint[], bigint[], boolean
) TO ql3_admin;
