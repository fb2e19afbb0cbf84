-- Progress of the QL3 side for one minute (`minute_ms`): Runs admitted for it, and their first
-- attempts that have finished (the workers ran them).
SELECT count(*) AS runs, count(a.finished_at_ms) AS finished
FROM ql3.runs AS r
LEFT JOIN ql3.attempts AS a ON a.run_id = r.id AND a.attempt_number = 1
WHERE r.scheduled_for_ms = %(minute_ms)s
