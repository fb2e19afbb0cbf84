-- ConsoleReader, replicas page: each owner's latest admission. A skip scan over the
-- (owner_id, created_at_ms) index: one probe per owner, never a scan of the whole history.
WITH RECURSIVE owners AS (
    (SELECT r.owner_id FROM ql3.runs AS r ORDER BY r.owner_id LIMIT 1)
    UNION ALL
    SELECT (
        SELECT r.owner_id FROM ql3.runs AS r
        WHERE r.owner_id > o.owner_id
        ORDER BY r.owner_id
        LIMIT 1
    )
    FROM owners AS o
    WHERE o.owner_id IS NOT NULL
)
SELECT o.owner_id,
       (SELECT max(r.created_at_ms) FROM ql3.runs AS r WHERE r.owner_id = o.owner_id)
           AS last_admitted_at_ms
FROM owners AS o
WHERE o.owner_id IS NOT NULL
ORDER BY o.owner_id
