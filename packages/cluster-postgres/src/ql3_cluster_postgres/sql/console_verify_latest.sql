-- ConsoleReader, verify page: the latest recorded `ql3 verify --record` verdict, if any.
SELECT v.id, v.recorded_at_ms, v.recorded_by, v.checked_at_ms, v.ok, v.schedules, v.runs,
       v.violation_total, v.violation_counts, v.violations
FROM ql3.verify_results AS v
ORDER BY v.id DESC
LIMIT 1
