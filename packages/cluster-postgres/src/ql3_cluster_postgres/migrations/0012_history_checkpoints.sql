-- QL3 schema, version 12: history retention with verified checkpoints (DESIGN §7, §11).
-- `ql3 history prune` removes old history in batches through ql3.admin_prune_history_v1 alone (a
-- SECURITY DEFINER function owned by ql3_owner, EXECUTE to ql3_admin only: no role has DELETE on
-- any history table). Each batch removes, per schedule, everything below one occurrence boundary
-- and writes, in the same transaction, a checkpoint that says what it removed: counts and a hash
-- chained over the identities of the rows. `ql3 verify` starts each schedule's accounting at its
-- latest checkpoint and proves the occurrences before it from the checkpoints' counts.
-- Times are database milliseconds (rule zero): the cutoff is the function's clock sample minus
-- the duration asked for, never a node's clock.

-- 1. Checkpoints ----------------------------------------------------------------------------------

-- One row per schedule per batch that removed something. covered_below_ms: every cron and
-- backfilled Run with an occurrence before it, every skip record ending before it, every manual
-- Run admitted before it, every resumed pause span and finished backfill request ending before
-- it, with their attempts and events, is gone; nothing at or after it was touched. The boundary
-- never splits a skip record, a pause span or a running backfill, and never passes the cursor, a
-- Run with a live attempt or a Run admitted after the cutoff. Counts are of the rows removed by
-- this batch: Runs by kind, skip records and skipped occurrences by reason, attempts by state.
-- hash = sha256(previous checkpoint's hash || the removed rows' identities, sorted), so a
-- checkpoint rewritten or dropped breaks the chain that `ql3 verify` walks.
CREATE TABLE ql3.history_checkpoints (
    id                  bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id         bigint  NOT NULL,
    seq                 integer NOT NULL,
    covered_from_ms     bigint,
    covered_below_ms    bigint  NOT NULL,
    last_occurrence_ms  bigint,
    cutoff_ms           bigint  NOT NULL,
    runs_by_kind        jsonb   NOT NULL,
    skip_records_by_reason jsonb NOT NULL,
    skipped_by_reason   jsonb   NOT NULL,
    attempts_by_state   jsonb   NOT NULL,
    events              bigint  NOT NULL,
    pauses              bigint  NOT NULL,
    backfills           bigint  NOT NULL,
    previous_hash       bytea,
    hash                bytea   NOT NULL,
    pruned_by           text    NOT NULL,
    created_at_ms       bigint  NOT NULL,
    CONSTRAINT history_checkpoints_seq_unique UNIQUE (schedule_id, seq),
    CONSTRAINT history_checkpoints_seq CHECK (seq >= 1),
    CONSTRAINT history_checkpoints_chain CHECK ((seq = 1) = (previous_hash IS NULL)),
    CONSTRAINT history_checkpoints_span
        CHECK (covered_from_ms IS NULL OR covered_from_ms < covered_below_ms),
    CONSTRAINT history_checkpoints_counts CHECK (events >= 0 AND pauses >= 0 AND backfills >= 0),
    CONSTRAINT history_checkpoints_cutoff CHECK (covered_below_ms <= cutoff_ms)
);

-- 2. The refusal bound ----------------------------------------------------------------------------

-- The shortest age history may be pruned at: what can still change about a Run after its
-- occurrence. The longest claim lease (60 000 ms, ql3_runtime_core.LEASE_MS_MAX) plus the
-- largest misfire grace, then the longest retry span of any task (max_attempts attempts, each
-- up to its timeout plus its backoff), plus the longest worker lease (the same 60 000 ms bound)
-- and the successor grace of an abandoned attempt.
CREATE FUNCTION ql3.history_prune_floor_ms() RETURNS bigint
    LANGUAGE sql STABLE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
RETURN 60000::bigint
    + coalesce((SELECT max(s.misfire_grace_ms) FROM ql3.trigger_schedules AS s), 0)
    + coalesce(
        (SELECT max(t.max_attempts::bigint * (t.timeout_ms + t.retry_backoff_ms))
         FROM ql3.tasks AS t),
        0)
    + 60000::bigint
    + ql3.attempt_successor_grace_ms();

-- 3. Pruning --------------------------------------------------------------------------------------

-- The boundary moved down until it splits nothing: not a skip record, a pause span or a backfill
-- request of the schedule that begins before it and ends at or after it. A pause after failures
-- begins at the earliest of the failed Runs it was decided on (the latest `failure_threshold`
-- Runs up to the one it names), which verify reads as long as the span is kept. Called by the
-- prune function only (as the owner); EXECUTE revoked from PUBLIC below.
CREATE FUNCTION ql3.history_prune_clip_v1(p_schedule_id bigint, p_at_ms bigint) RETURNS bigint
    LANGUAGE plpgsql STABLE
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
DECLARE
    v_at bigint := p_at_ms;
    v_start bigint;
BEGIN
    LOOP
        SELECT least(
                   (SELECT min(k.first_skipped_ms) FROM ql3.skipped_occurrences AS k
                    WHERE k.schedule_id = p_schedule_id AND k.first_skipped_ms < v_at
                      AND k.last_skipped_ms >= v_at),
                   (SELECT min(x.start_ms)
                    FROM ql3.schedule_pauses AS p
                    CROSS JOIN LATERAL (
                        SELECT least(coalesce(p.first_held_ms, p.paused_at_ms),
                                     min(f.scheduled_for_ms)) AS start_ms
                        FROM (SELECT u.scheduled_for_ms FROM ql3.runs AS u
                              WHERE p.cause = 'failures' AND u.schedule_id = p.schedule_id
                                AND u.id <= p.last_failed_run_id
                              ORDER BY u.id DESC LIMIT p.failure_threshold) AS f
                    ) AS x
                    WHERE p.schedule_id = p_schedule_id AND x.start_ms < v_at
                      AND (p.end_ms IS NULL OR p.end_ms >= v_at)),
                   (SELECT min(b.from_ms) FROM ql3.backfills AS b
                    WHERE b.schedule_id = p_schedule_id AND b.from_ms < v_at AND b.to_ms >= v_at))
        INTO v_start;
        EXIT WHEN v_start IS NULL OR v_start >= v_at;
        v_at := v_start;
    END LOOP;
    RETURN v_at;
END;
$$;

-- One batch: schedules in id order, each pruned up to its boundary, until p_batch Runs were
-- removed (a schedule's share may end early, at an occurrence, so that the next call resumes
-- it). Returns one row per schedule it looked at that has anything older than the cutoff:
-- the checkpoint written (seq NULL when nothing could be removed), the boundary, what was
-- removed, why the boundary stops short of the cutoff (clipped_by), and `more` (rows below the
-- boundary remain for a next call). p_dry_run: the same per schedule over the whole span, no
-- batching, nothing written. Refuses (22023, naming older_than_ms) a duration below
-- ql3.history_prune_floor_ms() and a batch outside 1..100 000.
CREATE FUNCTION ql3.admin_prune_history_v1(
    p_older_than_ms bigint,
    p_batch integer,
    p_dry_run boolean
) RETURNS TABLE (
    schedule_id bigint,
    seq integer,
    cutoff_ms bigint,
    covered_below_ms bigint,
    last_occurrence_ms bigint,
    runs bigint,
    skip_records bigint,
    attempts bigint,
    events bigint,
    clipped_by text,
    more boolean
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_floor_ms bigint := ql3.history_prune_floor_ms();
    v_cutoff bigint;
    v_budget bigint := p_batch;
    v_s ql3.trigger_schedules%ROWTYPE;
    v_bound bigint;
    v_b bigint;
    v_clip text;
    v_limit bigint;
    v_prev ql3.history_checkpoints%ROWTYPE;
    v_next_ms bigint;
    v_straddle bigint;
    v_runs bigint[];
    v_attempts bigint[];
    v_events bigint[];
    v_skips bigint[];
    v_pauses bigint[];
    v_backfills bigint[];
    v_runs_by_kind jsonb;
    v_skip_records jsonb;
    v_skipped jsonb;
    v_attempt_states jsonb;
    v_last_ms bigint;
    v_hash bytea;
    v_more boolean;
    v_count bigint;
BEGIN
    IF p_older_than_ms IS NULL OR p_older_than_ms < v_floor_ms THEN
        RAISE EXCEPTION
            'older_than_ms: % is below the shortest prunable age % ms (lease + grace + retry span)',
            p_older_than_ms, v_floor_ms
            USING ERRCODE = '22023', DETAIL = v_floor_ms::text;
    END IF;
    IF p_batch IS NULL OR p_batch NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'batch: % must be within 1..100000', p_batch USING ERRCODE = '22023';
    END IF;
    v_cutoff := v_now_ms - p_older_than_ms;
    FOR v_s IN SELECT * FROM ql3.trigger_schedules ORDER BY id LOOP
        EXIT WHEN v_budget <= 0 AND NOT p_dry_run;
        v_bound := v_cutoff;
        v_clip := NULL;
        -- Undecided occurrences: nothing at or after the cursor is history yet.
        IF v_s.state IN ('active', 'paused') AND v_s.next_due_at_ms IS NOT NULL
           AND v_s.next_due_at_ms < v_bound THEN
            v_bound := v_s.next_due_at_ms;
            v_clip := 'cursor';
        END IF;
        -- Live attempts: a Run a worker holds or will take keeps its occurrence and all after.
        SELECT min(r.scheduled_for_ms) INTO v_next_ms
        FROM ql3.runs AS r JOIN ql3.attempts AS a ON a.run_id = r.id
        WHERE r.schedule_id = v_s.id AND r.kind <> 'manual' AND a.state IN ('queued', 'running')
          AND r.scheduled_for_ms < v_bound;
        IF v_next_ms IS NOT NULL THEN v_bound := v_next_ms; v_clip := 'live attempt'; END IF;
        -- A Run admitted after the cutoff (late) is younger than asked, whatever its occurrence.
        SELECT min(r.scheduled_for_ms) INTO v_next_ms
        FROM ql3.runs AS r
        WHERE r.schedule_id = v_s.id AND r.kind <> 'manual' AND r.scheduled_for_ms < v_bound
          AND r.created_at_ms >= v_cutoff;
        IF v_next_ms IS NOT NULL THEN
            v_bound := v_next_ms;
            v_clip := 'admitted after cutoff';
        END IF;
        -- An open or recent pause span, a running backfill: never split.
        SELECT min(coalesce(p.first_held_ms, p.paused_at_ms)) INTO v_next_ms
        FROM ql3.schedule_pauses AS p
        WHERE p.schedule_id = v_s.id AND coalesce(p.first_held_ms, p.paused_at_ms) < v_bound
          AND (p.resumed_at_ms IS NULL OR p.end_ms >= v_bound OR p.resumed_at_ms >= v_cutoff);
        IF v_next_ms IS NOT NULL THEN v_bound := v_next_ms; v_clip := 'pause span'; END IF;
        SELECT min(b.from_ms) INTO v_next_ms
        FROM ql3.backfills AS b
        WHERE b.schedule_id = v_s.id AND b.from_ms < v_bound
          AND (b.state = 'running' OR b.to_ms >= v_bound);
        IF v_next_ms IS NOT NULL THEN v_bound := v_next_ms; v_clip := 'backfill'; END IF;
        -- A Coordinator's open claim decides occurrences from the cursor on: already clipped
        -- there; named when it is what stops the boundary.
        IF v_clip = 'cursor' AND v_s.claim_token IS NOT NULL THEN v_clip := 'open claim'; END IF;

        SELECT * INTO v_prev FROM ql3.history_checkpoints AS c
        WHERE c.schedule_id = v_s.id ORDER BY c.seq DESC LIMIT 1;
        IF v_prev.id IS NOT NULL AND v_bound <= v_prev.covered_below_ms THEN
            CONTINUE;
        END IF;
        -- Never split a skip record, a span or a backfill request: move down to its start.
        v_bound := ql3.history_prune_clip_v1(v_s.id, v_bound);
        IF v_prev.id IS NOT NULL AND v_bound <= v_prev.covered_below_ms THEN
            CONTINUE;
        END IF;
        -- This batch's share: at most the budget's Runs, ending at an occurrence (clipped the
        -- same way). When that leaves nothing to remove (one skip record or span holding more
        -- than the budget), the batch takes the schedule's whole span.
        v_b := v_bound;
        IF NOT p_dry_run THEN
            SELECT r.scheduled_for_ms INTO v_next_ms
            FROM ql3.runs AS r
            WHERE r.schedule_id = v_s.id AND r.kind <> 'manual' AND r.scheduled_for_ms < v_bound
            ORDER BY r.scheduled_for_ms OFFSET v_budget LIMIT 1;
            IF v_next_ms IS NOT NULL THEN
                v_b := ql3.history_prune_clip_v1(v_s.id, v_next_ms);
            END IF;
            SELECT least(
                       (SELECT min(r.scheduled_for_ms) FROM ql3.runs AS r
                        WHERE r.schedule_id = v_s.id AND r.kind <> 'manual'),
                       (SELECT min(k.first_skipped_ms) FROM ql3.skipped_occurrences AS k
                        WHERE k.schedule_id = v_s.id))
            INTO v_straddle;
            IF v_b <= coalesce(v_prev.covered_below_ms, v_b - 1)
               OR v_b <= coalesce(v_straddle, v_b - 1) THEN
                v_b := v_bound;
            END IF;
        END IF;

        -- Occurrence Runs by the (schedule_id, scheduled_for_ms) index; manual Runs (few) by
        -- their admission time, unless a worker still holds or will take one.
        v_runs := ARRAY(
            SELECT r.id FROM ql3.runs AS r
            WHERE r.schedule_id = v_s.id AND r.scheduled_for_ms < v_b AND r.kind <> 'manual')
            || ARRAY(
            SELECT r.id FROM ql3.runs AS r
            WHERE r.schedule_id = v_s.id AND r.kind = 'manual' AND r.created_at_ms < v_b
              AND NOT EXISTS (SELECT 1 FROM ql3.attempts AS a
                              WHERE a.run_id = r.id AND a.state IN ('queued', 'running')));
        v_skips := ARRAY(
            SELECT k.id FROM ql3.skipped_occurrences AS k
            WHERE k.schedule_id = v_s.id AND k.last_skipped_ms < v_b ORDER BY k.id);
        v_pauses := ARRAY(
            SELECT p.id FROM ql3.schedule_pauses AS p
            WHERE p.schedule_id = v_s.id AND p.resumed_at_ms IS NOT NULL AND p.end_ms < v_b
              AND p.resumed_at_ms < v_cutoff ORDER BY p.id);
        v_backfills := ARRAY(
            SELECT b.id FROM ql3.backfills AS b
            WHERE b.schedule_id = v_s.id AND b.state = 'done' AND b.to_ms < v_b ORDER BY b.id);
        CONTINUE WHEN cardinality(v_runs) = 0 AND cardinality(v_skips) = 0
                      AND cardinality(v_pauses) = 0 AND cardinality(v_backfills) = 0;
        v_attempts := ARRAY(SELECT a.id FROM ql3.attempts AS a
                            WHERE a.run_id = ANY (v_runs) ORDER BY a.id);
        v_events := ARRAY(SELECT e.id FROM ql3.events AS e
                          WHERE e.run_id = ANY (v_runs) ORDER BY e.id);
        SELECT coalesce(jsonb_object_agg(x.kind, x.n), '{}'::jsonb) INTO v_runs_by_kind
        FROM (SELECT r.kind, count(*) AS n FROM ql3.runs AS r WHERE r.id = ANY (v_runs)
              GROUP BY r.kind) AS x;
        SELECT coalesce(jsonb_object_agg(x.reason, x.n), '{}'::jsonb),
               coalesce(jsonb_object_agg(x.reason, x.c), '{}'::jsonb)
        INTO v_skip_records, v_skipped
        FROM (SELECT k.reason, count(*) AS n, sum(k.skipped_count) AS c
              FROM ql3.skipped_occurrences AS k WHERE k.id = ANY (v_skips)
              GROUP BY k.reason) AS x;
        SELECT coalesce(jsonb_object_agg(x.state, x.n), '{}'::jsonb) INTO v_attempt_states
        FROM (SELECT a.state, count(*) AS n FROM ql3.attempts AS a WHERE a.id = ANY (v_attempts)
              GROUP BY a.state) AS x;
        SELECT greatest(
                   (SELECT max(r.scheduled_for_ms) FROM ql3.runs AS r
                    WHERE r.id = ANY (v_runs) AND r.kind <> 'manual'),
                   (SELECT max(k.last_skipped_ms) FROM ql3.skipped_occurrences AS k
                    WHERE k.id = ANY (v_skips)))
        INTO v_last_ms;
        -- More left below the boundary for a next batch?
        v_more := v_b < v_bound AND EXISTS (
            SELECT 1 FROM ql3.runs AS r
            WHERE r.schedule_id = v_s.id AND r.kind <> 'manual' AND r.scheduled_for_ms >= v_b
              AND r.scheduled_for_ms < v_bound);
        IF p_dry_run THEN
            RETURN QUERY SELECT v_s.id, NULL::integer, v_cutoff, v_b, v_last_ms,
                cardinality(v_runs)::bigint, cardinality(v_skips)::bigint,
                cardinality(v_attempts)::bigint, cardinality(v_events)::bigint, v_clip, false;
            CONTINUE;
        END IF;
        -- The chain: sha256(previous hash || identities sorted by table, then id).
        SELECT sha256(coalesce(v_prev.hash, ''::bytea) || convert_to(coalesce(string_agg(
                   i.tbl || ':' || i.id::text, ',' ORDER BY i.tbl, i.id), ''), 'UTF8'))
        INTO v_hash
        FROM (SELECT 'attempt' AS tbl, unnest(v_attempts) AS id
              UNION ALL SELECT 'backfill', unnest(v_backfills)
              UNION ALL SELECT 'event', unnest(v_events)
              UNION ALL SELECT 'pause', unnest(v_pauses)
              UNION ALL SELECT 'run', unnest(v_runs)
              UNION ALL SELECT 'skip', unnest(v_skips)) AS i;
        DELETE FROM ql3.events AS e WHERE e.id = ANY (v_events);
        DELETE FROM ql3.attempts AS a WHERE a.id = ANY (v_attempts);
        DELETE FROM ql3.runs AS r WHERE r.id = ANY (v_runs);
        DELETE FROM ql3.skipped_occurrences AS k WHERE k.id = ANY (v_skips);
        DELETE FROM ql3.schedule_pauses AS p WHERE p.id = ANY (v_pauses);
        DELETE FROM ql3.backfills AS b WHERE b.id = ANY (v_backfills);
        INSERT INTO ql3.history_checkpoints (
            schedule_id, seq, covered_from_ms, covered_below_ms, last_occurrence_ms, cutoff_ms,
            runs_by_kind, skip_records_by_reason, skipped_by_reason, attempts_by_state, events,
            pauses, backfills, previous_hash, hash, pruned_by, created_at_ms)
        VALUES (
            v_s.id, coalesce(v_prev.seq, 0) + 1, v_prev.covered_below_ms, v_b, v_last_ms,
            v_cutoff, v_runs_by_kind, v_skip_records, v_skipped, v_attempt_states,
            cardinality(v_events), cardinality(v_pauses), cardinality(v_backfills),
            v_prev.hash, v_hash, session_user, v_now_ms);
        v_count := cardinality(v_runs);
        v_budget := v_budget - greatest(v_count, 1);
        RETURN QUERY SELECT v_s.id, coalesce(v_prev.seq, 0) + 1, v_cutoff, v_b, v_last_ms,
            v_count, cardinality(v_skips)::bigint, cardinality(v_attempts)::bigint,
            cardinality(v_events)::bigint, v_clip, v_more;
    END LOOP;
END;
$$;

-- 4. Grants ---------------------------------------------------------------------------------------

-- ql3_admin prunes through the function alone (no role but the owner has DELETE on any history
-- table) and reads checkpoints (verify). The runtime and the workers never need them.
GRANT SELECT ON ql3.history_checkpoints TO ql3_admin;
REVOKE ALL ON FUNCTION ql3.admin_prune_history_v1(bigint, integer, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.admin_prune_history_v1(bigint, integer, boolean) TO ql3_admin;
REVOKE ALL ON FUNCTION ql3.history_prune_clip_v1(bigint, bigint) FROM PUBLIC;
REVOKE ALL ON FUNCTION ql3.history_prune_floor_ms() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.history_prune_floor_ms() TO ql3_admin;
