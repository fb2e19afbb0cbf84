-- verify_history (rule `paused`): every recorded paused span with what verify judges it by: the
-- span before it (overlap), its `paused` skip records, the cron Runs admitted for occurrences
-- inside it, and for a pause after failures the outcomes of the schedule's finished Runs up to the
-- one it names (that Run's last attempt and the ones before it in (updated_at_ms, id) order: a
-- failure that committed after the pause with an earlier clock reading is not one it could see).
-- Times are the snapshot's (now_ms bounds an open span).
SELECT p.id, p.schedule_id, p.paused_at_ms, p.until_ms, p.first_held_ms, p.cause,
       p.failure_threshold, p.last_failed_run_id, p.resumed_at_ms, p.replay, p.automatic,
       p.end_ms, p.skipped_count,
       lag(p.resumed_at_ms) OVER w AS previous_resumed_at_ms,
       lag(p.id) OVER w AS previous_id,
       (lag(p.id) OVER w) IS NOT NULL AND (lag(p.resumed_at_ms) OVER w) IS NULL
           AS previous_open,
       k.records, k.first_ms, k.last_ms, k.recorded,
       r.runs AS runs_inside, r.first_run_ms, r.last_run_ms,
       f.finished, f.failed, f.latest_run_id
FROM ql3.schedule_pauses AS p
LEFT JOIN LATERAL (
    SELECT count(*) AS records, min(s.first_skipped_ms) AS first_ms,
           max(s.last_skipped_ms) AS last_ms, sum(s.skipped_count) AS recorded
    FROM ql3.skipped_occurrences AS s
    WHERE s.pause_id = p.id AND s.schedule_id = p.schedule_id AND s.reason = 'paused'
) AS k ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS runs, min(u.scheduled_for_ms) AS first_run_ms,
           max(u.scheduled_for_ms) AS last_run_ms
    FROM ql3.runs AS u
    WHERE u.schedule_id = p.schedule_id AND u.kind = 'cron'
      AND u.scheduled_for_ms >= p.first_held_ms
      AND u.scheduled_for_ms <= coalesce(p.end_ms, %(now_ms)s::bigint)
) AS r ON true
LEFT JOIN LATERAL (
    SELECT n.id, n.updated_at_ms
    FROM ql3.attempts AS n
    WHERE p.cause = 'failures' AND n.run_id = p.last_failed_run_id
    ORDER BY n.attempt_number DESC
    LIMIT 1
) AS named ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS finished,
           count(*) FILTER (WHERE o.state <> 'succeeded') AS failed,
           (array_agg(o.run_id ORDER BY o.updated_at_ms DESC, o.id DESC))[1] AS latest_run_id
    FROM (
        SELECT a.id, a.run_id, a.state, a.updated_at_ms
        FROM ql3.attempts AS a
        JOIN ql3.runs AS u ON u.id = a.run_id
        JOIN ql3.tasks AS t ON t.id = u.task_id
        WHERE p.cause = 'failures' AND u.schedule_id = p.schedule_id
          AND a.updated_at_ms <= p.paused_at_ms
          AND (a.updated_at_ms, a.id) <= (named.updated_at_ms, named.id)
          AND (a.state = 'succeeded'
               OR (a.state IN ('failed', 'timed_out', 'abandoned')
                   AND a.attempt_number >= t.max_attempts))
        ORDER BY a.updated_at_ms DESC, a.id DESC
        LIMIT p.failure_threshold
    ) AS o
) AS f ON true
WINDOW w AS (PARTITION BY p.schedule_id ORDER BY p.paused_at_ms, p.id)
ORDER BY p.schedule_id, p.paused_at_ms, p.id
