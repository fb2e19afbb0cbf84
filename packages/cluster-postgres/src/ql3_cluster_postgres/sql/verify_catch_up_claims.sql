-- verify_history (rule `misfire_policy`, catch_up): each claim that admitted more than one run of
-- a catch_up revision, with how many and its first and last occurrence. catch_up admits every
-- missed occurrence oldest first, so one claim's runs are consecutive occurrences: the rule
-- compares the count with the occurrences between the first and the last (cron math in Python).
WITH ranges AS (
    SELECT v.schedule_id,
           v.revision,
           v.misfire_policy,
           v.first_cursor_ms AS low,
           coalesce(lead(v.first_cursor_ms) OVER w, 9223372036854775807) AS high
    FROM ql3.schedule_revisions AS v
    WHERE v.first_cursor_ms IS NOT NULL
    WINDOW w AS (PARTITION BY v.schedule_id ORDER BY v.revision)
)
SELECT r.schedule_id,
       g.revision,
       r.claim_token::text AS claim_token,
       count(*) AS runs,
       min(r.scheduled_for_ms) AS first_ms,
       max(r.scheduled_for_ms) AS last_ms
FROM ql3.runs AS r
JOIN ranges AS g
  ON g.schedule_id = r.schedule_id
 AND r.scheduled_for_ms >= g.low
 AND r.scheduled_for_ms < g.high
WHERE r.scheduled_for_ms >= %(since_ms)s
  AND r.kind = 'cron'
  AND g.misfire_policy = 'catch_up'
GROUP BY r.schedule_id, g.revision, r.claim_token
HAVING count(*) > 1
ORDER BY r.schedule_id, min(r.scheduled_for_ms)
