-- Durable facts for an uncertain commit (DESIGN §6): the runs of the given occurrences of one
-- schedule, whoever admitted them, with their first attempts (a run admitted by this commit always
-- has one; a run found already there is only evidence that the occurrence was taken).
-- Read by name into FoundRun (_rows.py).
SELECT r.id AS run_id, a.id AS attempt_id, r.schedule_id, r.task_id, r.scheduled_for_ms,
       r.created_at_ms, r.owner_id, r.claim_token
FROM ql3.runs AS r
LEFT JOIN ql3.attempts AS a ON a.run_id = r.id AND a.attempt_number = 1
WHERE r.schedule_id = %(schedule_id)s
  AND r.scheduled_for_ms = ANY (%(occurrence_ms)s::bigint[])
ORDER BY r.scheduled_for_ms
