-- The first admission at or after the new primary's first write, per admitting replica.
SELECT r.owner_id, min(r.created_at_ms) AS first_ms
FROM ql3.runs AS r
WHERE r.created_at_ms >= %(since_ms)s
GROUP BY r.owner_id
