-- Every run of the given schedules with its attempt and event counts (rows per admission 1:1:2).
-- Read by name into RunRecord (_history.py): the column names are the field names.
SELECT r.schedule_id,
       r.scheduled_for_ms,
       r.created_at_ms,
       r.owner_id,
       (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id)::bigint AS attempts,
       (SELECT count(*) FROM ql3.events AS e WHERE e.run_id = r.id)::bigint AS events
FROM ql3.runs AS r
WHERE r.schedule_id = ANY(%(schedule_ids)s::bigint[])
ORDER BY r.schedule_id, r.scheduled_for_ms, r.id
