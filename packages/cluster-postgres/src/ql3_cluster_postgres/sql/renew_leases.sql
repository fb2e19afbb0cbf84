-- WorkerIngress.renew_leases: the heartbeat, ql3.worker_renew_leases_v1 (migration 0007): extend
-- to the database time + lease_ms the unexpired leases this login holds under the token.
SELECT r.attempt_id, r.lease_expires_at_ms
FROM ql3.worker_renew_leases_v1(
    %(lease_token)s::uuid, %(attempt_ids)s::bigint[], %(lease_ms)s::bigint
) AS r
