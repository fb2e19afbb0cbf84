-- verify_history (rule `backfill`): every backfilled Run in scope (migration 0011) with what
-- justifies it: its backfill request (schedule, include_before_creation), the skip record it
-- says it supersedes (schedule, range) and how many Runs its occurrence has (the
-- runs_occurrence_unique key: request_id NULL). Read from the runs_backfilled partial index;
-- also the set of occurrences the accounting walk leaves to this rule.
SELECT r.id,
       r.schedule_id,
       r.scheduled_for_ms,
       r.created_at_ms,
       r.backfill_id,
       r.supersedes_skip_id,
       b.schedule_id AS request_schedule_id,
       b.include_before_creation,
       k.schedule_id AS skip_schedule_id,
       k.first_skipped_ms,
       k.last_skipped_ms,
       (SELECT count(*)
        FROM ql3.runs AS o
        WHERE o.schedule_id = r.schedule_id
          AND o.scheduled_for_ms = r.scheduled_for_ms
          AND o.request_id IS NULL) AS runs_at_occurrence
FROM ql3.runs AS r
LEFT JOIN ql3.backfills AS b ON b.id = r.backfill_id
LEFT JOIN ql3.skipped_occurrences AS k ON k.id = r.supersedes_skip_id
WHERE r.kind = 'backfill'
  AND r.scheduled_for_ms >= %(since_ms)s
ORDER BY r.schedule_id, r.scheduled_for_ms, r.id
