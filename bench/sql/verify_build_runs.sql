-- Bench setup only (verify), run as the database superuser: the runs of occurrence indexes
-- low..high-1 of every planned schedule, each with its attempt and its two admission events at
-- the run's commit time, as the fenced commit writes them (DESIGN §5). Rows are inserted in
-- occurrence order across schedules, so the tables interleave schedules as a live history does.
-- Occurrence k of a schedule is first_ms + k * step_ms, committed 5..44 ms late; the occurrences
-- of its gap (if any) have no run (a skip record holds them) and the one after the gap is
-- committed just after the claim that skipped them.
WITH plan AS (
    SELECT *
    FROM unnest(
        %(schedule_ids)s::bigint[], %(task_ids)s::bigint[], %(first_ms)s::bigint[],
        %(step_ms)s::bigint[], %(occurrences)s::bigint[], %(gap_index)s::bigint[],
        %(gap_count)s::bigint[], %(claim_ms)s::bigint[]
    ) AS p (schedule_id, task_id, first_ms, step_ms, occurrences, gap_index, gap_count, claim_ms)
),
new_runs AS (
    INSERT INTO ql3.runs (
        schedule_id, task_id, scheduled_for_ms, owner_id, claim_token, created_at_ms
    )
    SELECT p.schedule_id, p.task_id, p.first_ms + k.k * p.step_ms, 'bench-verify',
           '00000000-0000-4000-8000-000000000001'::uuid,
           CASE
               WHEN k.k = p.gap_index + p.gap_count THEN p.claim_ms + 5
               ELSE p.first_ms + k.k * p.step_ms + 5 + mod(k.k * 7, 40)
           END
    FROM generate_series(%(low)s::bigint, %(high)s::bigint - 1) AS k (k)
    JOIN plan AS p ON k.k < p.occurrences
    WHERE p.gap_index IS NULL OR k.k NOT BETWEEN p.gap_index AND p.gap_index + p.gap_count - 1
    ORDER BY k.k, p.schedule_id
    RETURNING id, created_at_ms
),
new_attempts AS (
    INSERT INTO ql3.attempts (run_id, attempt_number, state, created_at_ms, updated_at_ms)
    SELECT r.id, 1, 'queued', r.created_at_ms, r.created_at_ms
    FROM new_runs AS r
    ORDER BY r.id
    RETURNING id, run_id, created_at_ms
)
INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)
SELECT a.run_id, a.id, e.kind, a.created_at_ms
FROM new_attempts AS a
CROSS JOIN (VALUES (1, 'run.admitted'), (2, 'attempt.queued')) AS e (position, kind)
ORDER BY a.run_id, e.position
