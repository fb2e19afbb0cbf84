-- Schema version 16: a worker's take, finish and lease renewal cost the same whatever the
-- planner's statistics say (DESIGN §10).
--
-- `ql3.worker_take_attempts_v2` keeps its signature, grants and decisions; its plans change,
-- each found on a durable cluster with 20 000 queued attempts and four workers (the worker
-- benchmark, with auto_explain):
--
-- - The pick (oldest eligible queued attempts, LIMIT the free slots) must walk the queue's
--   index `attempts_queued` in order. When the statistics still described an empty queue (they
--   lag a backlog admitted at once), the planner read every queued attempt through
--   `attempts_one_live` instead and sorted them, 63 ms a take for 20 000 of them. The function
--   now runs with `enable_sort = off`: a plan that sorts the whole queue is never preferred to
--   the ordered index, whatever the statistics; statements with no such alternative (the rows
--   returned in order, the policy's loop) still sort as before.
-- - The default policy's UPDATE found the picked attempts with `id = ANY (array)`. The queue's
--   partial index `attempts_queued` also covers `state = 'queued'` and holds `id`, so when the
--   statistics still described a short queue (they lag a backlog admitted at once) the planner
--   walked that whole index for a few ids instead of probing the primary key: 235 buffers for
--   three rows. The ids now join through `unnest`, probed by primary key whatever the statistics.
-- - The capped schedules' hint (running attempts of tasks with a `max_running`) was read on every
--   take, through the running attempts' index and its dead entries (a mean 0.36 ms of the take's
--   1.47 ms). It is read only when some task has a cap at all; without one it is empty, as before.
--
-- With the client's statement (`sql/take_attempts.sql`, no longer joining the runs table) a
-- take's mean server time went from 1.47 ms to 0.79 ms. The finish and the renewal (below) get
-- the same treatment for the same reason.

CREATE OR REPLACE FUNCTION ql3.worker_take_attempts_v2(
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
    SET enable_sort = off
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_full bigint[];
    v_plain bigint[];
    v_policy bigint[];
    v_take bigint[] := '{}';
    v_take_at bigint[] := '{}';
    v_skip bigint[] := '{}';
    v_skip_at bigint[] := '{}';
    v_cancel bigint[] := '{}';
    v_cancel_by bigint[] := '{}';
    v_cancel_at bigint[] := '{}';
    v_decided_ms bigint;
    v_floor_ms bigint;
    v_c record;
    v_schedule bigint;
    v_running bigint[];
    v_waiting integer;
    v_ahead integer;
    v_live integer;
    v_oldest bigint;
BEGIN
    PERFORM ql3.worker_check_lease_v1(p_lease_token, p_lease_ms);
    PERFORM ql3.worker_check_limit_v1(p_batch_limit);
    -- Capped schedules already at their cap by running attempts (unlocked, a hint for the pick:
    -- the decision below counts again under the lock). Running attempts are few (the workers'
    -- slots), read through attempts_running_lease; and only when some task has a cap at all
    -- (without one the hint is empty: every candidate is decided as the default policy's).
    IF EXISTS (SELECT FROM ql3.tasks AS ck WHERE ck.max_running IS NOT NULL) THEN
        SELECT coalesce(array_agg(f.schedule_id), '{}') INTO v_full
            FROM (
                SELECT xr.schedule_id
                FROM ql3.attempts AS x
                JOIN ql3.runs AS xr ON xr.id = x.run_id
                JOIN ql3.tasks AS xk ON xk.id = xr.task_id
                WHERE x.state = 'running' AND xk.max_running IS NOT NULL
                GROUP BY xr.schedule_id, xk.max_running
                HAVING count(*) >= xk.max_running
            ) AS f;
    ELSE
        v_full := '{}';
    END IF;
    WITH picked AS (
        SELECT a.id, k.overlap = 'allow' AND k.max_running IS NULL AS plain
        FROM ql3.attempts AS a
        JOIN ql3.runs AS r ON r.id = a.run_id
        JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE a.state = 'queued'
          AND coalesce(a.not_before_ms, a.created_at_ms) <= v_now_ms
          AND CASE
              WHEN k.command IS NULL THEN k.name = ANY (coalesce(p_python_tasks, '{}'))
              ELSE coalesce(p_commands, false)
          END
          AND NOT (r.schedule_id = ANY (v_full)
                   AND (k.overlap = 'allow' OR a.attempt_number > 1))
        ORDER BY coalesce(a.not_before_ms, a.created_at_ms), a.id
        LIMIT p_batch_limit
        FOR UPDATE OF a SKIP LOCKED
    )
    SELECT coalesce(array_agg(p.id) FILTER (WHERE p.plain), '{}'),
           coalesce(array_agg(p.id) FILTER (WHERE NOT p.plain), '{}')
        INTO v_plain, v_policy
        FROM picked AS p;

    -- The default policy's candidates skip all of this: no lock, no extra statement.
    IF cardinality(v_policy) > 0 THEN
    FOR v_c IN
        SELECT a.id, a.run_id, a.attempt_number, coalesce(a.not_before_ms, a.created_at_ms) AS eligible,
               r.schedule_id, r.kind, r.scheduled_for_ms, k.overlap, k.max_running
        FROM ql3.attempts AS a
        JOIN ql3.runs AS r ON r.id = a.run_id
        JOIN ql3.tasks AS k ON k.id = r.task_id
        WHERE a.id = ANY (v_policy)
        ORDER BY r.schedule_id, coalesce(a.not_before_ms, a.created_at_ms), a.id
    LOOP
        IF v_schedule IS DISTINCT FROM v_c.schedule_id THEN
            v_schedule := v_c.schedule_id;
            PERFORM pg_advisory_xact_lock(hashtextextended('ql3.overlap:' || v_schedule, 0));
            -- Running attempts of the schedule, oldest start first (a new snapshot: after the
            -- lock), and the database time of this decision, read after that snapshot was taken:
            -- an attempt that ended and freed a slot recorded its end before it committed, so
            -- before this reading; a Run started now never starts before that end.
            SELECT coalesce(array_agg(x.id ORDER BY x.started_at_ms, x.id), '{}'),
                   greatest(v_now_ms,
                            floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                INTO v_running, v_decided_ms
                FROM ql3.attempts AS x
                JOIN ql3.runs AS xr ON xr.id = x.run_id
                WHERE x.state = 'running' AND xr.schedule_id = v_schedule;
            v_waiting := 0;
        END IF;
        -- Due queued attempts of the schedule ahead of this one that this take does not hold.
        SELECT count(*) INTO v_ahead
            FROM ql3.attempts AS x
            JOIN ql3.runs AS xr ON xr.id = x.run_id
            WHERE x.state = 'queued'
              AND coalesce(x.not_before_ms, x.created_at_ms) <= v_now_ms
              AND xr.schedule_id = v_schedule
              AND (coalesce(x.not_before_ms, x.created_at_ms), x.id) < (v_c.eligible, v_c.id)
              AND NOT x.id = ANY (v_policy);
        v_live := cardinality(v_running) + v_ahead + v_waiting;
        -- Replace only when cancelling running ones frees a slot for this one: queued Runs ahead
        -- of it that fill the cap go first.
        WHILE v_live >= v_c.max_running AND v_c.overlap = 'replace' AND v_c.attempt_number = 1
              AND cardinality(v_running) > 0 AND v_ahead + v_waiting < v_c.max_running LOOP
            v_oldest := v_running[1];
            v_running := v_running[2:];
            IF v_oldest = ANY (v_take) THEN
                -- Taken a moment ago by this very take: it ends cancelled without starting.
                v_take_at := v_take_at[1:array_position(v_take, v_oldest) - 1]
                             || v_take_at[array_position(v_take, v_oldest) + 1:];
                v_take := array_remove(v_take, v_oldest);
            END IF;
            v_cancel := v_cancel || v_oldest;
            v_cancel_by := v_cancel_by || v_c.run_id;
            v_cancel_at := v_cancel_at || v_decided_ms;
            v_live := v_live - 1;
        END LOOP;
        IF v_live < v_c.max_running THEN
            v_take := v_take || v_c.id;
            v_take_at := v_take_at || v_decided_ms;
            v_running := v_running || v_c.id;
        ELSIF v_c.overlap = 'skip' AND v_c.attempt_number = 1 THEN
            v_skip := v_skip || v_c.id;
            v_skip_at := v_skip_at || v_decided_ms;
        ELSE
            v_waiting := v_waiting + 1;
        END IF;
    END LOOP;

    -- Cancel (replace): a running attempt of another take (its lease ends here; the row lock waits
    -- for a renewal or finish in flight, and one that finished first is left as it ended), or one
    -- this take picked and never started. A renewal may have moved its row's time past this
    -- decision's: the Runs this take starts start no earlier than the latest cancellation
    -- (v_floor_ms), so a replaced attempt and its replacement never overlap in database time.
    WITH cancelled AS (
        UPDATE ql3.attempts AS a
        SET state = 'cancelled',
            finished_at_ms = greatest(a.updated_at_ms, c.at_ms),
            updated_at_ms = greatest(a.updated_at_ms, c.at_ms),
            lease_token = NULL,
            lease_expires_at_ms = NULL
        FROM unnest(v_cancel, v_cancel_by, v_cancel_at) AS c (id, by_run_id, at_ms)
        WHERE a.id = c.id AND a.state IN ('running', 'queued')
        RETURNING a.id, a.run_id, a.worker_id, a.finished_at_ms, c.by_run_id
    ),
    cancel_events AS (
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        SELECT c.run_id, c.id, 'attempt.cancelled',
               jsonb_build_object('reason', 'overlap', 'policy', 'replace',
                                  'worker_id', c.worker_id, 'replaced_by_run_id', c.by_run_id),
               c.finished_at_ms
        FROM cancelled AS c
        ORDER BY c.id
        RETURNING ev.id
    )
    SELECT coalesce(max(c.finished_at_ms), 0) INTO v_floor_ms FROM cancelled AS c;

    -- Skip: the Run never executes; its occurrence (a cron Run's) is recorded skipped for overlap.
    WITH skipped AS (
        UPDATE ql3.attempts AS a
        SET state = 'skipped',
            finished_at_ms = greatest(a.updated_at_ms, k.at_ms),
            updated_at_ms = greatest(a.updated_at_ms, k.at_ms)
        FROM unnest(v_skip, v_skip_at) AS k (id, at_ms)
        WHERE a.id = k.id AND a.state = 'queued'
        RETURNING a.id, a.run_id, a.finished_at_ms
    ),
    skip_events AS (
        INSERT INTO ql3.events AS ev (run_id, attempt_id, kind, payload, created_at_ms)
        SELECT s.run_id, s.id, 'attempt.skipped',
               jsonb_build_object('reason', 'overlap', 'policy', 'skip', 'worker_id', p_worker_id),
               s.finished_at_ms
        FROM skipped AS s
        ORDER BY s.id
        RETURNING ev.id
    )
    INSERT INTO ql3.skipped_occurrences AS so (
        schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, reason, created_at_ms
    )
    SELECT r.schedule_id, r.scheduled_for_ms, r.scheduled_for_ms, 1, 'overlap', s.finished_at_ms
    FROM skipped AS s
    JOIN ql3.runs AS r ON r.id = s.run_id
    WHERE r.kind = 'cron'
    ORDER BY s.id;

    -- Take what the policy let start, each at its schedule's decision time (and not before the
    -- latest cancellation).
    RETURN QUERY
    WITH taken AS (
        UPDATE ql3.attempts AS a
        SET state = 'running',
            worker_id = p_worker_id,
            worker_login = session_user,
            lease_token = p_lease_token,
            taken_lease_token = p_lease_token,
            started_at_ms = greatest(a.updated_at_ms, i.at_ms, v_floor_ms),
            lease_expires_at_ms = greatest(a.updated_at_ms, i.at_ms, v_floor_ms) + p_lease_ms,
            updated_at_ms = greatest(a.updated_at_ms, i.at_ms, v_floor_ms)
        FROM unnest(v_take, v_take_at) AS i (id, at_ms)
        WHERE a.id = i.id AND a.state = 'queued'
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
    END IF;

    -- The default policy's candidates, exactly as v1 takes them.
    RETURN QUERY
    WITH taken AS (
        UPDATE ql3.attempts AS a
        SET state = 'running',
            worker_id = p_worker_id,
            worker_login = session_user,
            lease_token = p_lease_token,
            taken_lease_token = p_lease_token,
            started_at_ms = greatest(a.updated_at_ms, v_now_ms),
            lease_expires_at_ms = greatest(a.updated_at_ms, v_now_ms) + p_lease_ms,
            updated_at_ms = greatest(a.updated_at_ms, v_now_ms)
        FROM unnest(v_plain) AS i (id)
        WHERE a.id = i.id AND a.state = 'queued'
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

-- The finish and the renewal find their attempts by id and must still be running. Written
-- `state = 'running'`, that condition lets the planner serve the lookup from the partial index
-- `attempts_one_live` (queued and running attempts) instead of the primary key, and statistics
-- taken while few attempts were live make that look cheaper: every finish then reads the whole
-- backlog (19 999 rows for one, measured on the bench's baseline loop, which had the same
-- condition). `(state = 'running') IS TRUE` means the same for a NOT NULL column and proves no
-- partial index's predicate, so the primary key is the only index left. Bodies otherwise as in
-- migration 0007.

CREATE OR REPLACE FUNCTION ql3.worker_renew_leases_v1(
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
          AND (a.state = 'running') IS TRUE
          AND a.lease_token = p_lease_token
          AND a.worker_login = session_user
          AND a.lease_expires_at_ms > v_now_ms
        RETURNING a.id, a.lease_expires_at_ms
    )
    SELECT r.id, r.lease_expires_at_ms FROM renewed AS r ORDER BY r.id;
END
$$;

CREATE OR REPLACE FUNCTION ql3.worker_finish_attempt_v1(
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
      AND (a.state = 'running') IS TRUE
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
