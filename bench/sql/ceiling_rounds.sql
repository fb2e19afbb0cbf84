-- Admissions and fenced commits whose commit time lies in [since_ms, until_ms): every Run of
-- one fenced commit carries that commit's claim token and its one database observation.
SELECT
    count(*) AS admissions,
    count(DISTINCT (owner_id, claim_token, created_at_ms)) AS commits
FROM ql3.runs
WHERE created_at_ms >= %(since_ms)s AND created_at_ms < %(until_ms)s
