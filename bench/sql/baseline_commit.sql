-- Bare-SQL baseline, step 2 of 2 (one SERIALIZABLE transaction, this single statement, COMMIT):
-- fence every claimed row on owner + token + expiry by one database observation, admit exactly
-- one occurrence per row (the cursor; `* * * * * *` means the next is +1000 ms, no cron parsing),
-- release the claim, and write 1 run, 1 attempt and 2 events per occurrence.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
fenced AS (
    UPDATE ql3.trigger_schedules AS s
    SET next_due_at_ms = s.next_due_at_ms + 1000,
        claim_owner_id = NULL,
        claim_token = NULL,
        claim_expires_at_ms = NULL,
        updated_at_ms = obs.now_ms,
        version = s.version + 1
    FROM obs
    WHERE s.id = ANY(%(ids)s)
      AND s.claim_owner_id = %(owner)s
      AND s.claim_token = %(token)s
      AND s.claim_expires_at_ms > obs.now_ms
    RETURNING s.id, s.task_id, s.next_due_at_ms - 1000 AS scheduled_for_ms, obs.now_ms
),
runs AS (
    INSERT INTO ql3.runs
        (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms)
    SELECT f.id, f.task_id, f.scheduled_for_ms, %(owner)s, %(token)s, f.now_ms
    FROM fenced AS f
    RETURNING id, created_at_ms
),
attempts AS (
    INSERT INTO ql3.attempts (run_id, created_at_ms, updated_at_ms)
    SELECT r.id, r.created_at_ms, r.created_at_ms FROM runs AS r
    RETURNING id, run_id, created_at_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
SELECT a.run_id, a.id, k.kind, a.created_at_ms
FROM attempts AS a
CROSS JOIN (VALUES ('run.admitted'), ('attempt.queued')) AS k (kind)
