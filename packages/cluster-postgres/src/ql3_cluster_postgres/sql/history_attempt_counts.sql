-- HistoryReader.attempt_counts: attempts by state at one database instant. A queued attempt is
-- `ready` once its time has come (admission, or its successor's not_before_ms) and `waiting`
-- before (a retry's backoff); the oldest ready one says how long the queue has gone unserved,
-- in database time. Running attempts whose lease already expired are counted apart: no worker
-- has marked them abandoned yet. Skipped and cancelled ones are the overlap policy's (schema 9).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
SELECT obs.now_ms AS database_now_ms,
       count(a.id) FILTER (
           WHERE a.state = 'queued' AND coalesce(a.not_before_ms, a.created_at_ms) <= obs.now_ms
       ) AS queued_ready,
       count(a.id) FILTER (
           WHERE a.state = 'queued' AND coalesce(a.not_before_ms, a.created_at_ms) > obs.now_ms
       ) AS queued_waiting,
       count(a.id) FILTER (WHERE a.state = 'running') AS running,
       count(a.id) FILTER (
           WHERE a.state = 'running' AND a.lease_expires_at_ms <= obs.now_ms
       ) AS running_lease_expired,
       count(a.id) FILTER (WHERE a.state = 'succeeded') AS succeeded,
       count(a.id) FILTER (WHERE a.state = 'failed') AS failed,
       count(a.id) FILTER (WHERE a.state = 'timed_out') AS timed_out,
       count(a.id) FILTER (WHERE a.state = 'abandoned') AS abandoned,
       count(a.id) FILTER (WHERE a.state = 'skipped') AS skipped,
       count(a.id) FILTER (WHERE a.state = 'cancelled') AS cancelled,
       obs.now_ms - min(coalesce(a.not_before_ms, a.created_at_ms)) FILTER (
           WHERE a.state = 'queued' AND coalesce(a.not_before_ms, a.created_at_ms) <= obs.now_ms
       ) AS oldest_queued_age_ms
FROM obs
LEFT JOIN ql3.attempts AS a ON true
GROUP BY obs.now_ms
