-- WorkerIngress.finish_in_transaction, first in the task's transaction: the worker sessions'
-- short statement and idle-in-transaction timeouts would end a task that runs longer, so this
-- transaction gets the task's own timeout (plus the statement timeout) instead, until it ends.
SELECT set_config('statement_timeout', %(timeout_ms)s::text, true) AS statement_timeout,
       set_config('idle_in_transaction_session_timeout', %(timeout_ms)s::text, true)
           AS idle_in_transaction_session_timeout
