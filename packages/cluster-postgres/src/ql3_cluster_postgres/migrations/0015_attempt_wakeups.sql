-- Schema version 15: idle workers are woken when attempts are queued, instead of waiting for
-- their next poll (DESIGN §10).
--
-- Every statement that inserts attempts (an admission commit, a manual run, a backfill batch, a
-- successor queued by a finish or by an abandon) notifies `ql3_attempt_queued` once, with an
-- empty payload. PostgreSQL folds identical notifications of one transaction into one, so a
-- transaction sends one however many rows and statements it wrote: the cost is one entry in the
-- notification queue at COMMIT, never one per row. The notification is only a hint that a poll
-- now may find work; it is delivered only if the transaction commits, and a worker that missed it
-- (not listening, connection lost) still finds everything by polling. A successor whose backoff
-- has not passed, an attempt released back to `queued` and one an overlap policy made wait are
-- found by polling too.

CREATE FUNCTION ql3.notify_attempt_queued_v1() RETURNS trigger
    LANGUAGE plpgsql VOLATILE
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
BEGIN
    PERFORM pg_notify('ql3_attempt_queued', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER attempts_notify_queued
    AFTER INSERT ON ql3.attempts
    FOR EACH STATEMENT
    EXECUTE FUNCTION ql3.notify_attempt_queued_v1();

-- Firing a trigger needs no EXECUTE privilege on its function: nobody calls it directly.
REVOKE ALL ON FUNCTION ql3.notify_attempt_queued_v1() FROM PUBLIC;
