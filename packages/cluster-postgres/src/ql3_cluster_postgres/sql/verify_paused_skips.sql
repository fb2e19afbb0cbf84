-- verify_history (rule `paused`): `paused` skip records that lie outside the span they name (or
-- name none, or a span of another schedule, or one still open).
SELECT k.id, k.schedule_id, k.first_skipped_ms, k.last_skipped_ms, k.pause_id,
       p.schedule_id AS span_schedule_id, p.first_held_ms, p.end_ms
FROM ql3.skipped_occurrences AS k
LEFT JOIN ql3.schedule_pauses AS p ON p.id = k.pause_id
WHERE k.reason = 'paused'
  AND (p.id IS NULL OR p.schedule_id <> k.schedule_id OR p.end_ms IS NULL
       OR k.first_skipped_ms < p.first_held_ms OR k.last_skipped_ms > p.end_ms)
ORDER BY k.id
