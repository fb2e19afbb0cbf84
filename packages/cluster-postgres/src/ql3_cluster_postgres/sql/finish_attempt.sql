-- WorkerIngress.finish_attempt (and finish_in_transaction, inside the task's transaction):
-- ql3.worker_finish_attempt_v1 (migration 0007) records how an attempt this login holds under
-- the token ended, queues its successor when it did not succeed and attempts remain, or says
-- why nothing was written.
SELECT f.finished_id, f.finished_at_ms, f.next_attempt_id, f.next_not_before_ms, f.state_found,
       f.ended_by_this_lease
FROM ql3.worker_finish_attempt_v1(
    %(attempt_id)s::bigint, %(lease_token)s::uuid, %(state)s::text, %(exit_code)s::integer,
    %(output_tail)s::text
) AS f
