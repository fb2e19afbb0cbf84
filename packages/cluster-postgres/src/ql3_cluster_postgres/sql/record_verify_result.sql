-- record_verify_report (`ql3 verify --record`, as ql3_admin): one verdict row; the database
-- stamps when (recorded_at_ms, its clock) and who (session_user).
INSERT INTO ql3.verify_results (checked_at_ms, ok, schedules, runs, violation_total,
                                violation_counts, violations)
VALUES (%(checked_at_ms)s, %(ok)s, %(schedules)s, %(runs)s, %(violation_total)s,
        %(violation_counts)s::jsonb, %(violations)s::jsonb)
RETURNING id, recorded_at_ms
