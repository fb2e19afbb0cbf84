-- Admissions per owner whose commit time (the database's, written by the fenced commit) lies in
-- the half-open window [since_ms, until_ms).
SELECT owner_id, count(*) AS admissions
FROM ql3.runs
WHERE created_at_ms >= %(since_ms)s AND created_at_ms < %(until_ms)s
GROUP BY owner_id
ORDER BY owner_id
