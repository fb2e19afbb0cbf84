-- Bench report (verify): rows and on-disk size (with indexes) of the history tables.
SELECT (SELECT count(*) FROM ql3.runs) AS runs,
       (SELECT count(*) FROM ql3.attempts) AS attempts,
       (SELECT count(*) FROM ql3.events) AS events,
       (SELECT count(*) FROM ql3.skipped_occurrences) AS skip_records,
       (SELECT count(*) FROM ql3.schedule_revisions) AS revisions,
       pg_total_relation_size('ql3.runs') + pg_total_relation_size('ql3.attempts')
           + pg_total_relation_size('ql3.events') AS history_bytes
