-- verify_history: how many occurrences in scope were skipped for overlap (skip records of reason
-- overlap): each is accounted for once, by its Run that never executed (rule `overlap`), and
-- counted apart in the report (`overlap_skipped`).
SELECT count(*) AS skips
FROM ql3.skipped_occurrences AS k
WHERE k.reason = 'overlap' AND k.last_skipped_ms >= %(since_ms)s::bigint
