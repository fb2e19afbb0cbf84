-- ScheduleAdmin.backfill: ql3.admin_backfill_batch_v1 (migration 0011) admits one batch of the
-- request's occurrences (those without a Run), in this transaction, at one database time.
SELECT b.backfill_id, b.schedule_id, b.request_id, b.requested_by, b.requested_at_ms,
       b.batch_at_ms, b.admitted, b.already_run, b.total_admitted, b.total_already_run,
       b.batches, b.state
FROM ql3.admin_backfill_batch_v1(
    %(schedule)s::text, %(request_id)s::text, %(from_ms)s::bigint, %(to_ms)s::bigint,
    %(include_before_creation)s::boolean, %(occurrences)s::bigint[], %(skip_ids)s::bigint[],
    %(last)s::boolean
) AS b
