-- verify_history: how many runs are in scope (occurrences at or after since_ms).
SELECT count(*) AS runs FROM ql3.runs AS r WHERE r.scheduled_for_ms >= %(since_ms)s
