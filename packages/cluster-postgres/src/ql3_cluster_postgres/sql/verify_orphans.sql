-- verify_history: the attempts and events of one run id that has no run (found by
-- verify_shape.sql), to name each of them.
SELECT 'attempt' AS kind, a.id, a.run_id
FROM ql3.attempts AS a
WHERE a.run_id = %(run_id)s
UNION ALL
SELECT 'event' AS kind, e.id, e.run_id
FROM ql3.events AS e
WHERE e.run_id = %(run_id)s
ORDER BY 1, 2
