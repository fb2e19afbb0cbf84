-- The fencing columns of one schedule, for resolving an uncertain commit from durable facts.
-- Read by name into StoredSchedule (repository/_outcomes.py): the column names are the field names.
SELECT s.id AS schedule_id,
       s.state,
       s.next_due_at_ms,
       s.claim_owner_id AS owner_id,
       s.claim_token,
       s.claim_expires_at_ms,
       s.version,
       s.updated_at_ms
FROM ql3.trigger_schedules AS s
WHERE s.id = %(schedule_id)s
