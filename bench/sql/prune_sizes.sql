-- Bench report (prune): rows left and on-disk sizes (with indexes) of the history tables, the
-- checkpoints, and the whole database.
SELECT (SELECT count(*) FROM ql3.runs) AS runs,
       (SELECT count(*) FROM ql3.history_checkpoints) AS checkpoints,
       pg_total_relation_size('ql3.runs') + pg_total_relation_size('ql3.attempts')
           + pg_total_relation_size('ql3.events')
           + pg_total_relation_size('ql3.skipped_occurrences') AS history_bytes,
       pg_total_relation_size('ql3.history_checkpoints') AS checkpoint_bytes,
       pg_database_size(current_database()) AS database_bytes
