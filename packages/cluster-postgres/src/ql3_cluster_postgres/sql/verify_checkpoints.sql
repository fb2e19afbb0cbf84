-- verify_history (rule `checkpoint`): every history checkpoint (migration 0012) in chain order,
-- with the one before it in its schedule's chain (hash, seq, boundary), and for each schedule's
-- latest one the rows still present below its boundary (cron and backfilled Runs by occurrence,
-- skip records by their first occurrence): a prune removes all of them in the batch that writes it.
SELECT c.id,
       c.schedule_id,
       c.seq,
       c.covered_from_ms,
       c.covered_below_ms,
       c.last_occurrence_ms,
       c.runs_by_kind,
       c.skip_records_by_reason,
       c.skipped_by_reason,
       c.attempts_by_state,
       c.events,
       c.pauses,
       c.backfills,
       c.previous_hash,
       c.hash,
       lag(c.seq) OVER w AS prior_seq,
       lag(c.hash) OVER w AS prior_hash,
       lag(c.covered_below_ms) OVER w AS prior_below_ms,
       lead(c.seq) OVER w IS NULL AS latest,
       CASE WHEN lead(c.seq) OVER w IS NULL THEN
           (SELECT count(*) FROM ql3.runs AS r
            WHERE r.schedule_id = c.schedule_id AND r.kind <> 'manual'
              AND r.scheduled_for_ms < c.covered_below_ms)
       END AS runs_left,
       CASE WHEN lead(c.seq) OVER w IS NULL THEN
           (SELECT count(*) FROM ql3.skipped_occurrences AS k
            WHERE k.schedule_id = c.schedule_id AND k.first_skipped_ms < c.covered_below_ms)
       END AS skips_left
FROM ql3.history_checkpoints AS c
WINDOW w AS (PARTITION BY c.schedule_id ORDER BY c.seq)
ORDER BY c.schedule_id, c.seq
