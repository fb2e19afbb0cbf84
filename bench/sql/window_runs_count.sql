SELECT count(*) AS runs
FROM ql3.runs
WHERE scheduled_for_ms >= %(w0_ms)s AND scheduled_for_ms < %(w1_ms)s
