-- WorkerIngress.abandon_expired_attempts: ql3.worker_abandon_expired_attempts_v1 (migration
-- 0007) marks abandoned the running attempts whose lease expired by the database clock and
-- queues each successor not before the later of now + backoff and expiry + the successor grace.
SELECT b.attempt_id, b.run_id, b.attempt_number, b.worker_id, b.lease_expired_at_ms,
       b.abandoned_at_ms, b.next_attempt_id, b.next_not_before_ms
FROM ql3.worker_abandon_expired_attempts_v1(%(batch_limit)s::integer) AS b
