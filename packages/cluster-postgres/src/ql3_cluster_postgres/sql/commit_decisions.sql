-- DESIGN §5: runs inside a SERIALIZABLE transaction. One statement samples the database clock
-- once (`obs`) and locks each schedule by its exact claim (the UPDATE below), so the fence and
-- the time are the same observation.
-- * obs >= claim_expires_at_ms: that claim is raced, nothing written for it.
-- * the zone rules version a claim was decided with is not the recorded one: raced, nothing
--   written. The recorded row is read FOR KEY SHARE, which an adopt's FOR UPDATE excludes: a
--   commit either locks it before the adopt (and the adopt waits for this COMMIT) or waits for
--   the adopt to commit and then fails with 40001 (the row changed after this snapshot), and its
--   retry reads the new version. So a decision made under the old rules never commits after the
--   new ones are recorded.
-- * obs < claim_acquired_at_ms for any claim: the clock went back; `regressed` blocks every write
--   and the caller rolls back and raises.
-- * otherwise obs is created_at_ms/updated_at_ms of the Run, Attempt, both Events and schedule,
--   and of the skip record of each fenced claim whose decision skipped occurrences (DESIGN §7).
-- SSI: the schedule rows are found by ctid (a TID scan takes a tuple-level SIREAD lock only) and
-- the history tables are only inserted into (UNIQUE enforces one run per occurrence), so
-- replicas committing different schedules hold no predicate lock that the other's writes hit.
-- Identities come from INSERTs fed only by fenced rows: none is allocated for a raced claim.
-- An occurrence that already has a run is settled by that durable fact (ON CONFLICT DO NOTHING):
-- it is not admitted again and does not fail the other claims of the batch; no attempt, event or
-- notification is written for it, and the caller reports it (DESIGN §5). The arbiter probe
-- reads the index with a dirty snapshot, which takes no SIREAD lock; a conflicting run committed
-- after this transaction's snapshot still raises 40001 (retried) rather than being ignored.
-- Parameters: integer and ctid arrays come as array literals that the casts below parse (built
-- by `repository/_arrays.py`, one C-speed join each); text and uuid arrays are bound in binary
-- (placeholder suffix `b`): psycopg packs each element instead of rendering and quote-checking
-- it as text. Bound as text lists they cost ~25 us of replica CPU per claim, as much as deciding.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
claims AS (
    SELECT *
    FROM unnest(
        %(schedule_ids)s::bigint[], %(row_ctids)s::tid[], %(owner_ids)b::text[],
        %(claim_tokens)b::uuid[], %(versions)s::bigint[], %(acquired_ms)s::bigint[],
        %(expires_ms)s::bigint[], %(next_due_ms)s::bigint[], %(states)b::text[]
    ) AS c (
        schedule_id, row_ctid, owner_id, claim_token, version, acquired_ms, expires_ms,
        next_due_at_ms, state
    )
),
regressed AS (
    SELECT c.schedule_id, c.acquired_ms
    FROM claims AS c
    WHERE c.acquired_ms > (SELECT now_ms FROM obs)
    ORDER BY c.schedule_id
    LIMIT 1
),
fenced AS (
    UPDATE ql3.trigger_schedules AS s
    SET next_due_at_ms = c.next_due_at_ms,
        state = c.state,
        claim_owner_id = NULL,
        claim_token = NULL,
        claim_expires_at_ms = NULL,
        version = s.version + 1,
        updated_at_ms = obs.now_ms
    FROM claims AS c, obs
    WHERE s.ctid = ANY (%(row_ctids)s::tid[])
      AND s.ctid = c.row_ctid
      -- `+ 0` keeps the primary key index out of reach: an index scan would take btree-page
      -- SIREAD locks that other replicas' inserts hit. With enable_seqscan off for this
      -- session (see repository/_session.py), the TID scan is the only access path left.
      AND s.id + 0 = c.schedule_id
      AND s.claim_owner_id = c.owner_id
      AND s.claim_token = c.claim_token
      AND s.version = c.version
      AND s.updated_at_ms = c.acquired_ms
      AND s.claim_expires_at_ms = c.expires_ms
      AND obs.now_ms < c.expires_ms
      -- The batch's decisions were made with this zone rules version (see the header).
      AND %(zone_rules_version)s::text = (SELECT version FROM ql3.zone_rules FOR KEY SHARE)
      AND NOT EXISTS (SELECT FROM regressed)
    RETURNING s.id, s.task_id
),
occurrences AS (
    SELECT *
    FROM unnest(%(occurrence_schedule_ids)s::bigint[], %(occurrence_ms)s::bigint[])
        WITH ORDINALITY AS o (schedule_id, scheduled_for_ms, position)
),
new_runs AS (
    INSERT INTO ql3.runs (
        schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms
    )
    SELECT o.schedule_id, f.task_id, o.scheduled_for_ms, c.owner_id, c.claim_token, obs.now_ms
    FROM occurrences AS o
    JOIN fenced AS f ON f.id = o.schedule_id
    JOIN claims AS c ON c.schedule_id = o.schedule_id
    CROSS JOIN obs
    ORDER BY o.position
    ON CONFLICT ON CONSTRAINT runs_occurrence_unique DO NOTHING
    RETURNING id, schedule_id, task_id, scheduled_for_ms
),
skips AS (
    SELECT *
    FROM unnest(
        %(skip_schedule_ids)s::bigint[], %(skip_first_ms)s::bigint[], %(skip_last_ms)s::bigint[],
        %(skip_counts)s::bigint[], %(skip_policies)b::text[]
    ) AS k (schedule_id, first_ms, last_ms, skipped, policy)
),
new_skips AS (
    INSERT INTO ql3.skipped_occurrences (
        schedule_id, first_skipped_ms, last_skipped_ms, skipped_count, misfire_policy,
        claim_acquired_at_ms, owner_id, claim_token, created_at_ms
    )
    -- reason: the column's default, `misfire` (migrations/0006).
    SELECT k.schedule_id, k.first_ms, k.last_ms, k.skipped, k.policy, c.acquired_ms, c.owner_id,
           c.claim_token, obs.now_ms
    FROM skips AS k
    JOIN fenced AS f ON f.id = k.schedule_id
    JOIN claims AS c ON c.schedule_id = k.schedule_id
    CROSS JOIN obs
    RETURNING schedule_id
),
new_attempts AS (
    INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)
    SELECT r.id, 1, 'queued', obs.now_ms, obs.now_ms
    FROM new_runs AS r CROSS JOIN obs
    ORDER BY r.id
    RETURNING id, run_id
),
new_events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
    SELECT a.run_id, a.id, k.kind, obs.now_ms
    FROM new_attempts AS a
    CROSS JOIN (VALUES (1, 'run.admitted'), (2, 'attempt.queued')) AS k (position, kind)
    CROSS JOIN obs
    ORDER BY a.run_id, k.position
    RETURNING id
),
notified AS (
    SELECT pg_notify('ql3_run_admitted', id::text) FROM new_runs
)
-- Runs and attempts come back as parallel arrays, both ordered by run id (one attempt per run),
-- and are paired by the caller: joining two CTE scans here would be a nested loop. The column
-- names are the fields of CommitRow (_rows.py): Python reads them by name.
SELECT
    (SELECT now_ms FROM obs) AS observed_at_ms,
    (SELECT schedule_id FROM regressed) AS regressed_schedule_id,
    (SELECT acquired_ms FROM regressed) AS regressed_acquired_ms,
    ARRAY(SELECT id FROM fenced) AS fenced_schedule_ids,
    ARRAY(SELECT id FROM new_runs ORDER BY id) AS run_ids,
    ARRAY(SELECT id FROM new_attempts ORDER BY run_id) AS attempt_ids,
    ARRAY(SELECT schedule_id FROM new_runs ORDER BY id) AS run_schedule_ids,
    ARRAY(SELECT task_id FROM new_runs ORDER BY id) AS run_task_ids,
    ARRAY(SELECT scheduled_for_ms FROM new_runs ORDER BY id) AS run_scheduled_for_ms,
    ARRAY(SELECT run_id FROM new_attempts ORDER BY run_id) AS attempt_run_ids,
    (SELECT count(*) FROM new_events) AS events_written,
    (SELECT count(*) FROM notified) AS notifications,
    (SELECT count(*) FROM new_skips) AS skip_records_written
