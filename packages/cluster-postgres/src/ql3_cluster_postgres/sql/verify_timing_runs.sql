-- verify_history (rules `late` and `misfire_policy`): the runs in scope admitted later than their
-- revision's misfire grace under fire_once or skip, each with the policy and grace of the
-- revision whose range holds its occurrence and, when the same claim also wrote a misfire skip
-- record, that record's id and the claim's acquired time (the instant the decision was made
-- with). A run on time by its grace is never a candidate, so a healthy history returns the few
-- runs admitted after outages. In schedule and claim order, occurrences ascending, so the rules
-- judge one claim's runs together.
WITH ranges AS (
    SELECT v.schedule_id,
           v.revision,
           v.misfire_policy,
           v.misfire_grace_ms,
           v.first_cursor_ms AS low,
           coalesce(lead(v.first_cursor_ms) OVER w, 9223372036854775807) AS high
    FROM ql3.schedule_revisions AS v
    WHERE v.first_cursor_ms IS NOT NULL
    WINDOW w AS (PARTITION BY v.schedule_id ORDER BY v.revision)
),
claims AS (
    SELECT k.schedule_id, k.claim_token, min(k.id) AS skip_id,
           min(k.claim_acquired_at_ms) AS claim_acquired_at_ms
    FROM ql3.skipped_occurrences AS k
    WHERE k.reason = 'misfire'
    GROUP BY k.schedule_id, k.claim_token
)
SELECT r.id,
       r.schedule_id,
       r.scheduled_for_ms,
       r.created_at_ms,
       r.claim_token::text AS claim_token,
       g.revision,
       g.misfire_policy,
       g.misfire_grace_ms,
       c.skip_id,
       c.claim_acquired_at_ms
FROM ql3.runs AS r
JOIN ranges AS g
  ON g.schedule_id = r.schedule_id
 AND r.scheduled_for_ms >= g.low
 AND r.scheduled_for_ms < g.high
LEFT JOIN claims AS c ON c.schedule_id = r.schedule_id AND c.claim_token = r.claim_token
WHERE r.scheduled_for_ms >= %(since_ms)s
  AND r.kind = 'cron'
  AND g.misfire_policy IN ('fire_once', 'skip')
  AND r.created_at_ms - r.scheduled_for_ms > g.misfire_grace_ms
ORDER BY r.schedule_id, r.claim_token, r.scheduled_for_ms, r.id
