-- Admissions per owner over the whole history (the demo's live progress, read from ql3.runs).
SELECT owner_id, count(*)::bigint AS admissions
FROM ql3.runs
GROUP BY owner_id
ORDER BY owner_id
