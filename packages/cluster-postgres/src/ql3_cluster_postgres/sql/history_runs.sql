-- Every run of the given schedules with its attempt and event counts (1:1:2 at admission), how
-- many of its attempts succeeded and how many are still live (queued or running): the demo's
-- verdict on what was admitted and what its worker executed. `kind` tells the cron series
-- (`cron`) from Runs an operator triggered (`manual`), which fill no occurrence; `skipped` counts
-- attempts the overlap policy ended without executing them.
-- Read by name into RunRecord (_history.py): the column names are the field names.
SELECT r.schedule_id,
       r.scheduled_for_ms,
       r.created_at_ms,
       r.owner_id,
       r.kind,
       (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id)::bigint AS attempts,
       (SELECT count(*) FROM ql3.events AS e WHERE e.run_id = r.id)::bigint AS events,
       (SELECT count(*) FROM ql3.attempts AS a
        WHERE a.run_id = r.id AND a.state = 'succeeded')::bigint AS succeeded,
       (SELECT count(*) FROM ql3.attempts AS a
        WHERE a.run_id = r.id AND a.state = 'skipped')::bigint AS skipped,
       (SELECT count(*) FROM ql3.attempts AS a
        WHERE a.run_id = r.id AND a.state IN ('queued', 'running'))::bigint AS live
FROM ql3.runs AS r
WHERE r.schedule_id = ANY(%(schedule_ids)s::bigint[])
ORDER BY r.schedule_id, r.scheduled_for_ms, r.id
