-- WorkerIngress.renew_leases: the heartbeat. Extend to the database time + lease_ms the leases
-- the caller (its lease token) still holds and that have not expired by the database clock: an
-- expired lease is over even before another worker marks the attempt abandoned, so expiry is
-- decided by the database clock alone, never by who writes first. A lease never shrinks. No
-- event: a heartbeat changes nothing a history reader needs.
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
)
UPDATE ql3.attempts AS a
SET lease_expires_at_ms = greatest(a.lease_expires_at_ms, obs.now_ms + %(lease_ms)s::bigint),
    updated_at_ms = greatest(a.updated_at_ms, obs.now_ms)
FROM obs
WHERE a.id = ANY (%(attempt_ids)s::bigint[])
  AND a.state = 'running'
  AND a.lease_token = %(lease_token)s
  AND a.lease_expires_at_ms > obs.now_ms
RETURNING a.id AS attempt_id, a.lease_expires_at_ms
