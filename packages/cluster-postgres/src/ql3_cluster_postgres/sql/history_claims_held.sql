-- How many of the given schedules still record a claim (after every replica stopped: none).
SELECT count(*)::bigint AS claims
FROM ql3.trigger_schedules
WHERE id = ANY(%(schedule_ids)s::bigint[]) AND claim_token IS NOT NULL
