-- The oracle's backfilled Runs (kind 'backfill', schema 11) that DESIGN §7 does not justify: the
-- skip record a Run says it supersedes is missing, of another schedule or does not cover its
-- occurrence; a Run naming none is not before its schedule's first cursor of revision 1 or its
-- request did not ask for that; another Run holds its occurrence. Whether it is on the cron is
-- left to the occurrence rules' zones; the occurrence accounting reads cron Runs only.
SELECT r.id, r.schedule_id, r.scheduled_for_ms,
       CASE
           WHEN r.supersedes_skip_id IS NOT NULL AND k.id IS NULL
               THEN 'supersedes a skip record that does not exist'
           WHEN r.supersedes_skip_id IS NOT NULL AND k.schedule_id <> r.schedule_id
               THEN 'supersedes a skip record of another schedule'
           WHEN r.supersedes_skip_id IS NOT NULL
                AND NOT r.scheduled_for_ms BETWEEN k.first_skipped_ms AND k.last_skipped_ms
               THEN 'supersedes a skip record that does not cover it'
           WHEN r.supersedes_skip_id IS NULL
                AND (b.include_before_creation IS NOT TRUE OR v.first_cursor_ms IS NULL
                     OR r.scheduled_for_ms >= v.first_cursor_ms)
               THEN 'has no skip record and is no requested occurrence before creation'
           ELSE 'shares its occurrence with another Run'
       END AS problem
FROM ql3.runs AS r
LEFT JOIN ql3.skipped_occurrences AS k ON k.id = r.supersedes_skip_id
LEFT JOIN ql3.backfills AS b ON b.id = r.backfill_id
LEFT JOIN ql3.schedule_revisions AS v ON v.schedule_id = r.schedule_id AND v.revision = 1
WHERE r.kind = 'backfill'
  AND (%(since_ms)s::bigint IS NULL OR r.scheduled_for_ms >= %(since_ms)s::bigint)
  AND (
      (r.supersedes_skip_id IS NOT NULL
       AND (k.id IS NULL OR k.schedule_id <> r.schedule_id
            OR NOT r.scheduled_for_ms BETWEEN k.first_skipped_ms AND k.last_skipped_ms))
      OR (r.supersedes_skip_id IS NULL
          AND (b.include_before_creation IS NOT TRUE OR v.first_cursor_ms IS NULL
               OR r.scheduled_for_ms >= v.first_cursor_ms))
      OR EXISTS (SELECT 1 FROM ql3.runs AS o
                 WHERE o.schedule_id = r.schedule_id AND o.scheduled_for_ms = r.scheduled_for_ms
                   AND o.request_id IS NULL AND o.id <> r.id)
  )
ORDER BY r.id
