-- ScheduleAdmin: per locked schedule, the latest occurrence already decided (admitted as a run or
-- passed by a skip record), read after the lock so no commit can land in between. A cursor placed
-- anew goes strictly after it (DESIGN §7). Both reads walk an index of that schedule only. A
-- manual Run (request_id set, migration 0008) decides no occurrence: it is not counted.
SELECT i.id,
       greatest(
           (SELECT max(r.scheduled_for_ms)
            FROM ql3.runs AS r
            WHERE r.schedule_id = i.id AND r.request_id IS NULL),
           (SELECT max(k.last_skipped_ms)
            FROM ql3.skipped_occurrences AS k
            WHERE k.schedule_id = i.id)
       ) AS latest_ms
FROM unnest(%(schedule_ids)s::bigint[]) AS i (id)
