-- Bare-SQL baseline, step 2 of 2 (one SERIALIZABLE transaction, this single statement, COMMIT).
-- The same work as QL3's catch_up commit (DESIGN §4, §5): every due occurrence of the claimed rows,
-- oldest first, in claim order, up to `budget` occurrences in all (QL3's cycle budget left); the
-- crons have a fixed period (`period_ms`: 1 000 for `* * * * * *`, 60 000 for `* * * * *`), so no
-- cron parsing. Each row is fenced on owner + token + expiry by one database observation, its
-- cursor moves past what was admitted, its claim is cleared, and each occurrence writes 1 run,
-- 1 attempt and 2 events. Returns how many occurrences were admitted and how many of the claimed
-- rows got at least one (`served`: the rest found the budget spent, as QL3's starved claims).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
claimed AS MATERIALIZED (
    SELECT s.id, s.task_id, s.next_due_at_ms,
           array_position(%(ids)s::bigint[], s.id) AS ord
    FROM ql3.trigger_schedules AS s
    WHERE s.id = ANY(%(ids)s::bigint[])
),
occ AS MATERIALIZED (
    SELECT c.id, c.task_id, t.t AS scheduled_for_ms,
           row_number() OVER (ORDER BY c.ord, t.t) AS n
    FROM claimed AS c
    CROSS JOIN obs
    CROSS JOIN LATERAL generate_series(
        c.next_due_at_ms,
        least(obs.now_ms, c.next_due_at_ms + (%(budget)s::bigint - 1) * %(period_ms)s::bigint),
        %(period_ms)s::bigint
    ) AS t (t)
),
taken AS MATERIALIZED (
    SELECT o.id, o.task_id, o.scheduled_for_ms FROM occ AS o WHERE o.n <= %(budget)s
),
last_taken AS (
    SELECT t.id, max(t.scheduled_for_ms) AS last_ms FROM taken AS t GROUP BY t.id
),
fenced AS (
    UPDATE ql3.trigger_schedules AS s
    SET next_due_at_ms = coalesce(l.last_ms + %(period_ms)s::bigint, s.next_due_at_ms),
        claim_owner_id = NULL,
        claim_token = NULL,
        claim_expires_at_ms = NULL,
        updated_at_ms = obs.now_ms,
        version = s.version + 1
    FROM obs, claimed AS c
    LEFT JOIN last_taken AS l ON l.id = c.id
    WHERE s.id = c.id
      AND s.claim_owner_id = %(owner)s
      AND s.claim_token = %(token)s
      AND s.claim_expires_at_ms > obs.now_ms
    RETURNING s.id, obs.now_ms
),
runs AS (
    INSERT INTO ql3.runs
        (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms)
    SELECT t.id, t.task_id, t.scheduled_for_ms, %(owner)s, %(token)s, f.now_ms
    FROM taken AS t
    JOIN fenced AS f ON f.id = t.id
    RETURNING id, created_at_ms
),
attempts AS (
    INSERT INTO ql3.attempts (run_id, created_at_ms, updated_at_ms)
    SELECT r.id, r.created_at_ms, r.created_at_ms FROM runs AS r
    RETURNING id, run_id, created_at_ms
),
events AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
    SELECT a.run_id, a.id, k.kind, a.created_at_ms
    FROM attempts AS a
    CROSS JOIN (VALUES ('run.admitted'), ('attempt.queued')) AS k (kind)
)
SELECT (SELECT count(*) FROM runs) AS admitted,
       (SELECT count(DISTINCT t.id) FROM taken AS t JOIN fenced AS f ON f.id = t.id) AS served
