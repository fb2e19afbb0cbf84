-- verify_history: the runs in scope, per schedule in run id order (the order their commits took
-- ids in), each compared with the one before it. Returned are only the runs that break a rule on
-- their own (`early`: committed before the occurrence; `future`: committed after the database
-- clock now_ms) or against that neighbour (`time_backwards`: an earlier commit time; `order`: an
-- earlier occurrence), plus each schedule's newest run, whose commit time the schedule row must
-- not be behind. The sort by (schedule, id) is the one sort verify asks for: PostgreSQL spills it
-- to temporary files past work_mem, so neither it nor the checker holds the runs in memory.
SELECT x.id,
       x.schedule_id,
       x.scheduled_for_ms,
       x.created_at_ms,
       x.before_id,
       x.before_ms,
       x.before_created_ms,
       x.newest
FROM (
    SELECT r.id,
           r.schedule_id,
           r.scheduled_for_ms,
           r.created_at_ms,
           lag(r.id) OVER w AS before_id,
           lag(r.scheduled_for_ms) OVER w AS before_ms,
           lag(r.created_at_ms) OVER w AS before_created_ms,
           lead(r.id) OVER w IS NULL AS newest
    FROM ql3.runs AS r
    WHERE r.scheduled_for_ms >= %(since_ms)s
      AND r.kind = 'cron'
    WINDOW w AS (PARTITION BY r.schedule_id ORDER BY r.id)
) AS x
WHERE x.newest
   OR x.created_at_ms < x.scheduled_for_ms
   OR x.created_at_ms > %(now_ms)s
   OR x.created_at_ms < x.before_created_ms
   OR x.scheduled_for_ms < x.before_ms
ORDER BY x.schedule_id, x.id
