-- verify_history: attempts and events that point at no run (history has no FOREIGN KEYs on
-- purpose, see the schema, so the checker is what proves their integrity).
SELECT 'attempt' AS kind, a.id, a.run_id
FROM ql3.attempts AS a
WHERE NOT EXISTS (SELECT 1 FROM ql3.runs AS r WHERE r.id = a.run_id)
UNION ALL
SELECT 'event' AS kind, e.id, e.run_id
FROM ql3.events AS e
WHERE NOT EXISTS (SELECT 1 FROM ql3.runs AS r WHERE r.id = e.run_id)
ORDER BY 1, 2
