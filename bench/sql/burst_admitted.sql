-- How many occurrences of the burst at `at_ms` exist so far (the harness polls it).
SELECT count(*) AS runs FROM ql3.runs WHERE scheduled_for_ms = %(at_ms)s
