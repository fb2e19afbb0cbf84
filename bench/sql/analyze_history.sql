ANALYZE ql3.runs, ql3.attempts, ql3.trigger_schedules, ql3.skipped_occurrences
