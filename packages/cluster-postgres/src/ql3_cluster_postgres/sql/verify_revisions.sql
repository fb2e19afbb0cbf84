-- verify_history: every schedule revision (migrations/0004), with the latest occurrence already
-- decided (a run, or the end of a skip record) before its first cursor: what the admin had to
-- place that cursor after (DESIGN §7). NULL first cursor: every decided occurrence counts. Each
-- revision names the zone rules version its occurrences are computed with. Manual Runs decide no
-- occurrence (migration 0008): only cron runs (request_id IS NULL) count.
SELECT v.schedule_id,
       v.revision,
       v.reason,
       v.cron,
       v.timezone,
       v.misfire_policy,
       v.misfire_grace_ms,
       v.start_at_ms,
       v.end_at_ms,
       v.first_cursor_ms,
       v.end_cursor_ms,
       v.placed_after_ms,
       v.created_at_ms,
       v.ended_at_ms,
       v.zone_rules_version,
       greatest(
           -- One bound instead of "first cursor IS NULL OR below it" keeps this a backward
           -- index scan that stops at its first row, not a walk of the schedule's runs.
           (SELECT max(r.scheduled_for_ms)
            FROM ql3.runs AS r
            WHERE r.schedule_id = v.schedule_id
              AND r.request_id IS NULL
              AND r.scheduled_for_ms < coalesce(v.first_cursor_ms, 9223372036854775807)),
           (SELECT max(k.last_skipped_ms)
            FROM ql3.skipped_occurrences AS k
            WHERE k.schedule_id = v.schedule_id
              AND k.last_skipped_ms < coalesce(v.first_cursor_ms, 9223372036854775807))
       ) AS decided_before_ms
FROM ql3.schedule_revisions AS v
ORDER BY v.schedule_id, v.revision
