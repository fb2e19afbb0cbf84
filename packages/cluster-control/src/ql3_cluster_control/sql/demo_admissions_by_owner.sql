-- Live progress of the demo: admissions per replica, read from the durable history.
SELECT owner_id, count(*)::bigint AS admissions
FROM ql3.runs
GROUP BY owner_id
ORDER BY owner_id
