-- WorkerIngress: move one attempt from one of from_states to state at database time (never
-- backwards) and append the matching event in the same statement. When nothing changed, the
-- attempt's current state (or NULL if it does not exist) tells the caller why.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
changed AS (
    UPDATE ql3.attempts AS a
    SET state = %(state)s, updated_at_ms = greatest(a.updated_at_ms, obs.now_ms)
    FROM obs
    WHERE a.id = %(attempt_id)s AND a.state = ANY (%(from_states)s::text[])
    RETURNING a.id, a.run_id, a.updated_at_ms
),
state_event AS (
    INSERT INTO ql3.events (run_id, attempt_id, kind, payload, created_at_ms)
    SELECT c.run_id, c.id, %(kind)s, %(payload)s, obs.now_ms
    FROM changed AS c CROSS JOIN obs
    RETURNING id
)
SELECT
    (SELECT updated_at_ms FROM changed) AS updated_at_ms,
    (SELECT count(*) FROM state_event) AS events,
    (SELECT a.state FROM ql3.attempts AS a WHERE a.id = %(attempt_id)s) AS state_before
