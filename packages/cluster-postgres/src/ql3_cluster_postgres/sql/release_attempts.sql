-- WorkerIngress.release_attempts (and settle_taken_attempts): ql3.worker_release_attempts_v1
-- (migration 0007) hands back attempts this login holds under the token: queued again with
-- the same number, eligible at once; attempt.released each.
SELECT r.attempt_id
FROM ql3.worker_release_attempts_v1(
    %(worker_id)s::text, %(lease_token)s::uuid, %(attempt_ids)s::bigint[]
) AS r
