-- Where each schedule row lives now, for claims this process did not take itself. Read outside
-- the SERIALIZABLE commit, which then fences on this ctid plus the exact claim.
SELECT s.id AS schedule_id, s.ctid::text AS ctid
FROM ql3.trigger_schedules AS s
WHERE s.id = ANY (%(schedule_ids)s::bigint[])
