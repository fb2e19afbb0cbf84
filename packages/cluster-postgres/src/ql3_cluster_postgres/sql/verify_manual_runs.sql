-- verify_history (rule `manual_run`): the manual Runs in scope (migration 0008) that do not hold
-- together as `ql3.admin_trigger_run_v1` writes them: admitted at the instant they are for
-- (scheduled_for_ms = created_at_ms, the function's one clock reading), not before their
-- schedule existed, no later than the database clock now_ms, and announced by a `run.admitted`
-- event naming their request. Their attempts and events are judged by the `shape` and `attempts`
-- rules like any Run's.
WITH manual AS (
    SELECT r.id, r.schedule_id, r.request_id, r.scheduled_for_ms, r.created_at_ms,
           s.created_at_ms AS schedule_created_ms,
           (SELECT e.payload ->> 'request_id'
            FROM ql3.events AS e
            WHERE e.run_id = r.id AND e.kind = 'run.admitted'
            ORDER BY e.id
            LIMIT 1) AS admitted_request_id
    FROM ql3.runs AS r
    LEFT JOIN ql3.trigger_schedules AS s ON s.id = r.schedule_id
    WHERE r.kind = 'manual'
      AND r.scheduled_for_ms >= %(since_ms)s
)
SELECT m.id, m.schedule_id, m.request_id, m.scheduled_for_ms, m.created_at_ms,
       m.schedule_created_ms, m.admitted_request_id
FROM manual AS m
WHERE m.scheduled_for_ms <> m.created_at_ms
   OR m.created_at_ms < m.schedule_created_ms
   OR m.created_at_ms > %(now_ms)s
   OR m.admitted_request_id IS DISTINCT FROM m.request_id
ORDER BY m.id
