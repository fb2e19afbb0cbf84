-- prune_history: one batch of ql3.admin_prune_history_v1 (migration 0012), its own transaction:
-- per schedule, the checkpoint it wrote (or, dry run, what it would remove), read by name.
SELECT p.schedule_id, p.seq, p.cutoff_ms, p.covered_below_ms, p.last_occurrence_ms, p.runs,
       p.skip_records, p.attempts, p.events, p.clipped_by, p.more
FROM ql3.admin_prune_history_v1(%(older_than_ms)s::bigint, %(batch)s::integer,
                                %(dry_run)s::boolean) AS p
