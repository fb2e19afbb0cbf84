-- Schema version 17: a worker's take reaches the attempts it picked by primary key whatever the
-- statistics or the table's size, and is planned once per session.
--
-- `ql3.worker_take_attempts_v2` keeps its signature, grants and decisions (migration 0016's body,
-- restated whole with two changes), found on a durable cluster with 20 000 queued attempts and
-- four workers (the worker benchmark, `pg_stat_statements` and `auto_explain` on nested
-- statements):
--
-- - Its UPDATEs found the picked attempts (`id` from an array) with `a.state = 'queued'` beside
--   the id. That condition is the predicate of the queue's partial index `attempts_queued` and
--   implies that of `attempts_one_live`, so when the statistics still described an almost
--   empty queue (a backlog admitted at once outruns autovacuum's ANALYZE) the planner read the
--   whole queue through one of them and matched the ids against it: 20 000 rows to update
--   four, 5-8 ms a take, for as long as the statistics lagged (the slow first passes of the
--   benchmark). Written `(a.state = 'queued') IS TRUE` (the cancelled ones'
--   `(a.state IN ('running', 'queued')) IS TRUE`), the same condition for the NOT NULL column
--   proves no partial index's predicate, as for the finish and the renewal since 0016.
-- - Its UPDATE was planned anew on every call (a custom plan sees how many ids the array holds,
--   so it always looked cheaper than the generic one): a quarter of a take's server time, for
--   the same plan every time. The function now runs with `plan_cache_mode =
--   force_generic_plan`, planned once per session. A plan kept for the session is made against
--   the tables as they are at the worker's first take: one made on an empty queue read the
--   whole table (a sequential scan, or a full index scan, then a hash join) on every take once
--   a backlog came. So the function also runs with `enable_seqscan`, `enable_bitmapscan`,
--   `enable_hashjoin` and `enable_mergejoin` off: what it reads, it reads by key, a handful of
--   rows a call (the pick walks the queue's index in order, `enable_sort = off` since 0016), so
--   whatever the tables hold when it is planned, its plan probes indexes by key. A take: 0.88 ms
--   -> 0.54 ms of server time under that load.
-- - Whether any task has a cap (0016 reads the capped schedules' hint only then) was answered
--   by reading `ql3.tasks` until a capped one turned up: every task when none has a cap (the
--   usual case), on every take, one task per schedule. The partial index `tasks_capped` holds
--   only the capped ones, so the answer is one probe of an index that is usually empty.
--
-- No row changes. Building `tasks_capped` reads `ql3.tasks` once and holds writes to it
-- meanwhile (migrations run with the workers and replicas stopped).

CREATE INDEX tasks_capped ON ql3.tasks (id) WHERE max_running IS NOT NULL;

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
    SET enable_seqscan = off
    SET enable_bitmapscan = off
    SET enable_hashjoin = off
    SET enable_mergejoin = off
    SET plan_cache_mode = force_generic_plan
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
        WHERE a.id = c.id AND (a.state IN ('running', 'queued')) IS TRUE
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
        WHERE a.id = k.id AND (a.state = 'queued') IS TRUE
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
        WHERE a.id = i.id AND (a.state = 'queued') IS TRUE
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
        WHERE a.id = i.id AND (a.state = 'queued') IS TRUE
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
