-- The oracle's view of pruned history (migration 0012), one row per schedule with checkpoints:
-- the latest boundary (everything of the schedule before it was removed), how many checkpoints
-- and the highest number, the cron Runs and skipped occurrences (every reason but overlap,
-- whose occurrence is its Run's) they removed, and whether each links to the one before it
-- (previous hash = that one's hash, span beginning where it ended).
SELECT c.schedule_id,
       (array_agg(c.covered_below_ms ORDER BY c.seq DESC))[1] AS covered_below_ms,
       count(*) AS checkpoints,
       max(c.seq) AS top_seq,
       sum(coalesce((c.runs_by_kind ->> 'cron')::bigint, 0)) AS cron_runs,
       sum(k.skipped) AS skipped,
       bool_and(p.hash IS NOT DISTINCT FROM c.previous_hash
                AND p.covered_below_ms IS NOT DISTINCT FROM c.covered_from_ms) AS linked
FROM ql3.history_checkpoints AS c
LEFT JOIN ql3.history_checkpoints AS p ON p.schedule_id = c.schedule_id AND p.seq = c.seq - 1
CROSS JOIN LATERAL (
    SELECT coalesce(sum(e.value::bigint), 0) AS skipped
    FROM jsonb_each_text(c.skipped_by_reason) AS e
    WHERE e.key <> 'overlap'
) AS k
GROUP BY c.schedule_id
ORDER BY c.schedule_id
