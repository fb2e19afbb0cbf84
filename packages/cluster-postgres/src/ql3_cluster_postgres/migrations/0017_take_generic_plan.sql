-- Schema version 17: a worker's take is planned once per session, not once per call.
--
-- Every statement of `ql3.worker_take_attempts_v2` (migration 0016) is cached by PL/pgSQL, but
-- the planner re-planned the default policy's UPDATE on every call: the ids it updates come in
-- an array whose length a custom plan can see and a generic plan cannot, so the custom plan
-- always looked cheaper and the generic one was never chosen. Measured on a durable cluster with
-- 20 000 queued no-op tasks and four workers (`pg_stat_statements`, nested statements and
-- planning tracked): 0.21 ms of a take's 0.78 ms was that planning, and the plan was the same
-- every time (the primary key, probed once per id). The take now runs with
-- `plan_cache_mode = force_generic_plan`: each statement is planned once per session, with
-- `enable_sort = off` (0016) still keeping the pick on the queue's index in order. Under that
-- load a take's mean server time went from 0.90 ms to 0.68 ms. Signature, grants, body and
-- decisions are unchanged; no row changes.

ALTER FUNCTION ql3.worker_take_attempts_v2(text, uuid, bigint, integer, text[], boolean)
    SET plan_cache_mode = force_generic_plan;
