-- ConsoleReader, the schedules page's heading and page links: how many schedules there are (the
-- schedules table alone, never the history).
SELECT count(*)::bigint AS schedules
FROM ql3.trigger_schedules
