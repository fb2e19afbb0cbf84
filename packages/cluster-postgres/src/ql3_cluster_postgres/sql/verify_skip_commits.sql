-- verify_history (rule `skip_record`, contents): every misfire skip record in scope with what the
-- database recorded about its writing: its commit time, its stored lateness columns, the grace
-- and lifetime of the revision whose range holds its first occurrence, and the commit times of
-- the runs its claim admitted (the commit writes a claim's runs and its skip record at one
-- clock sample). One scan of runs, joined on the claims that skipped.
WITH ranges AS (
    SELECT v.schedule_id,
           v.revision,
           v.misfire_grace_ms,
           v.created_at_ms,
           v.ended_at_ms,
           v.first_cursor_ms AS low,
           coalesce(lead(v.first_cursor_ms) OVER w, 9223372036854775807) AS high
    FROM ql3.schedule_revisions AS v
    WHERE v.first_cursor_ms IS NOT NULL
    WINDOW w AS (PARTITION BY v.schedule_id ORDER BY v.revision)
),
claim_runs AS (
    SELECT r.schedule_id, r.claim_token, min(r.created_at_ms) AS runs_first_ms,
           max(r.created_at_ms) AS runs_last_ms, count(*) AS runs
    FROM ql3.runs AS r
    WHERE (r.schedule_id, r.claim_token) IN (
        SELECT k.schedule_id, k.claim_token FROM ql3.skipped_occurrences AS k
    )
    GROUP BY r.schedule_id, r.claim_token
)
SELECT k.id,
       k.schedule_id,
       k.first_skipped_ms,
       k.last_skipped_ms,
       k.claim_acquired_at_ms,
       k.created_at_ms,
       k.lateness_newest_ms,
       k.lateness_oldest_ms,
       g.revision,
       g.misfire_grace_ms,
       g.created_at_ms AS revision_created_ms,
       g.ended_at_ms AS revision_ended_ms,
       c.runs,
       c.runs_first_ms,
       c.runs_last_ms
FROM ql3.skipped_occurrences AS k
LEFT JOIN ranges AS g
  ON g.schedule_id = k.schedule_id
 AND k.first_skipped_ms >= g.low
 AND k.first_skipped_ms < g.high
LEFT JOIN claim_runs AS c ON c.schedule_id = k.schedule_id AND c.claim_token = k.claim_token
WHERE k.last_skipped_ms >= %(since_ms)s
  AND k.reason = 'misfire'
ORDER BY k.schedule_id, k.first_skipped_ms, k.id
