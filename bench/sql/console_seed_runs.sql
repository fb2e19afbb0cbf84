-- bench.console: the given number of Runs per schedule, one a second back from the database clock,
-- each admitted 5..200 ms late by replica r0, r1 or r2, with one finished attempt: the history
-- the console pages read (written as the superuser, in one statement).
WITH obs AS MATERIALIZED (
    SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now_ms
),
made AS (
    INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,
                          created_at_ms)
    SELECT s.id, s.task_id, obs.now_ms - mod(obs.now_ms, 1000) - g.i * 1000, 'r' || mod(g.i, 3),
           gen_random_uuid(), obs.now_ms - mod(obs.now_ms, 1000) - g.i * 1000 + 5 + mod(g.i * 37, 196)
    FROM obs
    CROSS JOIN ql3.trigger_schedules AS s
    CROSS JOIN generate_series(1, %(per_schedule)s) AS g (i)
    RETURNING id, created_at_ms
)
INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms,
                          worker_id, started_at_ms, finished_at_ms, exit_code, output_tail)
SELECT made.id, 1, 'succeeded', made.created_at_ms, made.created_at_ms + 40, 'w1',
       made.created_at_ms + 10, made.created_at_ms + 40, 0, 'ok'
FROM made
