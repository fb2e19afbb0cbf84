-- WorkerIngress.settle_taken_attempts, after the durability barrier: the attempts this login
-- holds under the lease token (running), so a worker that lost a take's answer learns what the
-- take gave it.
SELECT a.id AS attempt_id
FROM ql3.attempts AS a
WHERE a.state = 'running'
  AND a.lease_token = %(lease_token)s::uuid
  AND a.worker_login = session_user
ORDER BY a.id
