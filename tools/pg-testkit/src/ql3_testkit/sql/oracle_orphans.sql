-- The oracle's orphans: attempts and events of a run that does not exist (history has no FKs).
SELECT 'attempt' AS kind, a.id, a.run_id
FROM ql3.attempts AS a
WHERE NOT EXISTS (SELECT 1 FROM ql3.runs AS r WHERE r.id = a.run_id)
UNION ALL
SELECT 'event' AS kind, e.id, e.run_id
FROM ql3.events AS e
WHERE NOT EXISTS (SELECT 1 FROM ql3.runs AS r WHERE r.id = e.run_id)
ORDER BY kind, id
