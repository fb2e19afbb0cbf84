-- Claims still recorded on the given schedules after every replica stopped (must be none).
SELECT count(*)::bigint AS claims
FROM ql3.trigger_schedules
WHERE id = ANY(%(schedule_ids)s) AND claim_token IS NOT NULL
