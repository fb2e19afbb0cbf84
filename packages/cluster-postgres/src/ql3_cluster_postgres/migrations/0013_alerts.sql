-- QL3 schema, version 13: alerts, recorded exactly once. A schedule asks to be told about some of
-- four kinds (alert_on): `missed` (an occurrence with neither a Run nor a skip record by its due
-- time + the longest claim lease + its misfire grace), `late` (a Run not succeeded by its
-- scheduled time + the schedule's alert_deadline_ms), `failed` (a Run whose last allowed attempt
-- ended without success) and `paused` (the schedule paused itself after failures). An alert is a
-- row of ql3.alerts, UNIQUE per schedule, kind and subject (the occurrence, the Run or the pause
-- span), written by the database with its own clock: `failed` and `paused` by triggers on the
-- rows that make them true, `missed` and `late` by ql3.record_due_alerts_v1, which Coordinators
-- and workers alike call (so `missed` is recorded while every Coordinator is down). Workers then
-- deliver each alert (a command run like a task and/or a JSON POST to a webhook) with retries and
-- exponential backoff, the alert id as idempotency key; every delivery attempt's outcome is a row
-- of ql3.alert_deliveries at database time. Every write goes through SECURITY DEFINER functions:
-- no role gains INSERT or UPDATE on the new tables.

-- 1. What a schedule asks for ----------------------------------------------------------------------

ALTER TABLE ql3.trigger_schedules
    ADD COLUMN alert_on          text[] NOT NULL DEFAULT '{}',
    ADD COLUMN alert_command     text,
    ADD COLUMN alert_webhook     text,
    ADD COLUMN alert_deadline_ms bigint,
    ADD CONSTRAINT trigger_schedules_alert_on
        CHECK (alert_on <@ ARRAY['missed', 'late', 'failed', 'paused']::text[]),
    ADD CONSTRAINT trigger_schedules_alert_command
        CHECK (alert_command IS NULL
               OR (length(alert_command) BETWEEN 1 AND 8192 AND alert_command ~ '\S')),
    ADD CONSTRAINT trigger_schedules_alert_webhook
        CHECK (alert_webhook IS NULL
               OR (length(alert_webhook) <= 2048 AND alert_webhook ~ '^https?://[^\s]+$')),
    -- `late` needs its deadline: 1 s .. 7 days after the scheduled time.
    ADD CONSTRAINT trigger_schedules_alert_deadline CHECK (
        (alert_deadline_ms IS NULL OR alert_deadline_ms BETWEEN 1000 AND 604800000)
        AND (NOT ('late' = ANY (alert_on)) OR alert_deadline_ms IS NOT NULL)
    );

-- The `missed` probe: active schedules that asked for it, by cursor. Idle schedules that did not
-- ask cost nothing; one whose cursor is in the future is past the end of the index range scanned.
CREATE INDEX trigger_schedules_missed_alerts ON ql3.trigger_schedules (next_due_at_ms)
    WHERE state = 'active' AND 'missed' = ANY (alert_on);

-- 2. Alerts and their deliveries ---------------------------------------------------------------------

-- subject_key: the occurrence (epoch ms) for `missed`, the Run id for `late` and `failed`, the
-- pause span id for `paused`. command / webhook: what the schedule asked for when the alert was
-- raised (a later change of the schedule does not redirect an alert already raised).
-- delivery_state: 'pending' until a delivery attempt succeeded ('delivered') or the attempts ran
-- out ('failed'). A pending alert is held by one worker at a time under a lease (the columns of
-- 0005's attempts, same meaning); next_delivery_at_ms is when it may be tried (again).
CREATE TABLE ql3.alerts (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    schedule_id         bigint  NOT NULL,
    kind                text    NOT NULL,
    subject_key         bigint  NOT NULL,
    run_id              bigint,
    pause_id            bigint,
    occurrence_ms       bigint,
    detail              jsonb   NOT NULL DEFAULT '{}'::jsonb,
    raised_at_ms        bigint  NOT NULL,
    raised_by           text    NOT NULL,
    command             text,
    webhook             text,
    delivery_state      text    NOT NULL DEFAULT 'pending',
    delivery_attempts   integer NOT NULL DEFAULT 0,
    next_delivery_at_ms bigint  NOT NULL,
    lease_token         uuid,
    lease_expires_at_ms bigint,
    worker_login        text,
    delivered_at_ms     bigint,
    CONSTRAINT alerts_once UNIQUE (schedule_id, kind, subject_key),
    CONSTRAINT alerts_kind CHECK (kind IN ('missed', 'late', 'failed', 'paused')),
    CONSTRAINT alerts_subject CHECK (
        (kind = 'missed') = (occurrence_ms IS NOT NULL AND subject_key = occurrence_ms)
        AND (kind IN ('late', 'failed')) = (run_id IS NOT NULL AND subject_key = run_id)
        AND (kind = 'paused') = (pause_id IS NOT NULL AND subject_key = pause_id)
    ),
    CONSTRAINT alerts_delivery_state CHECK (delivery_state IN ('pending', 'delivered', 'failed')),
    CONSTRAINT alerts_delivered CHECK (
        (delivery_state = 'delivered') = (delivered_at_ms IS NOT NULL)
        AND (delivered_at_ms IS NULL OR delivered_at_ms >= raised_at_ms)
    ),
    CONSTRAINT alerts_lease CHECK (
        (lease_token IS NULL) = (lease_expires_at_ms IS NULL)
        AND (lease_token IS NULL OR delivery_state = 'pending')
    ),
    CONSTRAINT alerts_attempts CHECK (delivery_attempts BETWEEN 0 AND 10)
);

-- Workers take pending alerts in the order they may be tried; the index holds only those.
CREATE INDEX alerts_pending ON ql3.alerts (next_delivery_at_ms, id) WHERE delivery_state = 'pending';
CREATE INDEX alerts_schedule ON ql3.alerts (schedule_id, kind, id);

CREATE TABLE ql3.alert_deliveries (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    alert_id       bigint  NOT NULL,
    attempt_number integer NOT NULL,
    outcome        text    NOT NULL,
    error          text,
    worker_login   text    NOT NULL,
    worker_id      text    NOT NULL,
    started_at_ms  bigint  NOT NULL,
    finished_at_ms bigint  NOT NULL,
    CONSTRAINT alert_deliveries_once UNIQUE (alert_id, attempt_number),
    CONSTRAINT alert_deliveries_outcome CHECK (outcome IN ('delivered', 'failed')),
    CONSTRAINT alert_deliveries_error CHECK (
        (outcome = 'failed') = (error IS NOT NULL) AND length(error) <= 4096
    ),
    CONSTRAINT alert_deliveries_times CHECK (finished_at_ms >= started_at_ms)
);

-- Since when a schedule asks for each kind (turning a kind on again restarts it: what happened
-- while it was off is not judged), and for `late` up to which scheduled time its Runs were
-- judged: record_due_alerts_v1 judges each Run once, when its deadline has passed. `ql3 verify`
-- (rule `alert`) judges each kind from its since_ms.
CREATE TABLE ql3.alert_watermarks (
    schedule_id bigint NOT NULL,
    kind        text   NOT NULL,
    since_ms    bigint NOT NULL,
    checked_ms  bigint NOT NULL,
    PRIMARY KEY (schedule_id, kind),
    CONSTRAINT alert_watermarks_kind CHECK (kind IN ('missed', 'late', 'failed', 'paused')),
    CONSTRAINT alert_watermarks_order CHECK (checked_ms >= since_ms - 1)
);

-- 3. Raising one alert -------------------------------------------------------------------------------

-- Insert one alert unless that schedule already has one of that kind for that subject; the
-- channels are copied from the schedule. Returns the new id, NULL when it existed.
CREATE FUNCTION ql3.raise_alert_v1(
    p_schedule_id bigint, p_kind text, p_subject_key bigint, p_run_id bigint, p_pause_id bigint,
    p_occurrence_ms bigint, p_detail jsonb, p_now_ms bigint
) RETURNS bigint
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
DECLARE
    v_id bigint;
BEGIN
    INSERT INTO ql3.alerts AS a (
        schedule_id, kind, subject_key, run_id, pause_id, occurrence_ms, detail, raised_at_ms,
        raised_by, command, webhook, next_delivery_at_ms
    )
    SELECT s.id, p_kind, p_subject_key, p_run_id, p_pause_id, p_occurrence_ms,
           p_detail || jsonb_build_object('schedule', k.name), p_now_ms, session_user,
           s.alert_command, s.alert_webhook, p_now_ms
    FROM ql3.trigger_schedules AS s JOIN ql3.tasks AS k ON k.id = s.task_id
    WHERE s.id = p_schedule_id
    ON CONFLICT ON CONSTRAINT alerts_once DO NOTHING
    RETURNING a.id INTO v_id;
    RETURN v_id;
END
$$;

-- `failed`: the Run's last allowed attempt ended without success.
CREATE FUNCTION ql3.alert_failed_v1() RETURNS trigger
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
DECLARE
    v_schedule_id bigint;
    v_max integer;
    v_asks boolean;
BEGIN
    SELECT r.schedule_id, k.max_attempts, 'failed' = ANY (s.alert_on)
        INTO v_schedule_id, v_max, v_asks
        FROM ql3.runs AS r
        JOIN ql3.tasks AS k ON k.id = r.task_id
        JOIN ql3.trigger_schedules AS s ON s.id = r.schedule_id
        WHERE r.id = NEW.run_id;
    IF v_asks AND NEW.attempt_number >= v_max THEN
        PERFORM ql3.raise_alert_v1(
            v_schedule_id, 'failed', NEW.run_id, NEW.run_id, NULL, NULL,
            jsonb_build_object('run_id', NEW.run_id, 'attempt_id', NEW.id,
                               'attempt_number', NEW.attempt_number, 'state', NEW.state,
                               'exit_code', NEW.exit_code),
            floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER attempts_alert_failed
    AFTER UPDATE OF state ON ql3.attempts
    FOR EACH ROW
    WHEN (NEW.state IN ('failed', 'timed_out', 'abandoned') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION ql3.alert_failed_v1();

-- `paused`: the database paused the schedule after failures (0010's pause_after_failures_v1).
CREATE FUNCTION ql3.alert_paused_v1() RETURNS trigger
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM ql3.trigger_schedules AS s
               WHERE s.id = NEW.schedule_id AND 'paused' = ANY (s.alert_on)) THEN
        PERFORM ql3.raise_alert_v1(
            NEW.schedule_id, 'paused', NEW.id, NULL, NEW.id, NULL,
            jsonb_build_object('pause_id', NEW.id, 'reason', NEW.reason,
                               'last_failed_run_id', NEW.last_failed_run_id),
            NEW.paused_at_ms);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER schedule_pauses_alert_paused
    AFTER INSERT ON ql3.schedule_pauses
    FOR EACH ROW
    WHEN (NEW.cause = 'failures')
    EXECUTE FUNCTION ql3.alert_paused_v1();

-- 4. `missed` and `late`: what any Coordinator or worker checks ---------------------------------

-- The longest claim lease (trigger_schedules_claim_window): an occurrence is missed only once no
-- claim taken at its due time could still be deciding it.
CREATE FUNCTION ql3.alert_missed_margin_ms() RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT 60000::bigint $$;

-- Record the `missed` and `late` alerts whose bound the database clock has passed; return them,
-- and return what a caller needs to compute the other missed occurrences of each overdue schedule.
-- missed: one alert per occurrence that has neither a Run nor a skip record by its due time +
--   margin + its grace. SQL cannot compute cron occurrences, so the work is split. Here, for
--   each active schedule asking for it whose cursor (the first occurrence nobody decided) is past
--   that bound, the cursor's alert is recorded (it is an occurrence: no computation needed), and
--   one row of kind 'overdue' is returned: the cursor, after_ms (the latest occurrence alerted
--   so far, at least the cursor), bound_ms (the latest instant an occurrence may have to be
--   missed now), the definition in force and the recorded zone rules version, oldest cursor
--   first. The caller computes the occurrences in (after_ms, bound_ms] with the cron engine (at
--   most 1 000 over all schedules a call, in that order) and hands them to
--   ql3.record_missed_alerts_v1, which re-checks everything under the database clock. A caller
--   whose zone rules are not the recorded version computes nothing: then only the cursor's
--   alert is recorded. Nothing overdue: no row, one cheap statement.
-- late: each Run of a schedule asking for it, scheduled in (checked_ms, now - deadline],
--   without an attempt that succeeded by its scheduled time + deadline. The watermark row is
--   locked SKIP LOCKED: two callers never judge the same span twice, and never wait on each other.
-- Alert rows carry NULL in the overdue columns; overdue rows carry a NULL alert_id and subject.
-- A schedule a live claim holds gets no overdue row (a Coordinator is deciding it now). Custom
-- plans only: an outage fills ql3.alerts faster than autovacuum analyzes it, and a generic plan
-- made while it looked empty scans it whole for every overdue schedule (measured: past the
-- 5 s statement timeout with 59 000 alerts; 0.1 ms a lookup with a custom plan). The alerts of
-- all overdue schedules are looked up by the one driving query, planned once a call.
CREATE FUNCTION ql3.record_due_alerts_v1()
RETURNS TABLE (
    alert_id bigint, kind text, schedule_id bigint, subject_key bigint, cursor_ms bigint,
    after_ms bigint, bound_ms bigint, cron text, timezone text, misfire_policy text,
    misfire_grace_ms bigint, start_at_ms bigint, end_at_ms bigint, zone_rules_version text
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
    SET plan_cache_mode = force_custom_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_margin bigint := ql3.alert_missed_margin_ms();
    v_row record;
    v_id bigint;
    v_last bigint;
    v_rules text;
BEGIN
    FOR v_row IN
        SELECT s.id, s.next_due_at_ms, s.misfire_grace_ms, s.cron, s.timezone, s.misfire_policy,
               s.start_at_ms, s.end_at_ms, s.claim_expires_at_ms,
               -- The UNIQUE key's index answers both, the second backwards in one step. Scalar
               -- subqueries: an EXISTS may be planned as a hash of every `missed` alert.
               (SELECT true FROM ql3.alerts AS a
                WHERE a.schedule_id = s.id AND a.kind = 'missed'
                  AND a.subject_key = s.next_due_at_ms) IS NOT NULL AS cursor_alerted,
               (SELECT max(a.subject_key) FROM ql3.alerts AS a
                WHERE a.schedule_id = s.id AND a.kind = 'missed') AS last_alerted_ms
        FROM ql3.trigger_schedules AS s
        WHERE s.state = 'active' AND 'missed' = ANY (s.alert_on)
          AND s.next_due_at_ms < v_now_ms - v_margin
          AND s.next_due_at_ms + v_margin + s.misfire_grace_ms < v_now_ms
        ORDER BY s.next_due_at_ms, s.id
    LOOP
        IF v_rules IS NULL THEN
            v_rules := (SELECT z.version FROM ql3.zone_rules AS z);
        END IF;
        IF NOT v_row.cursor_alerted THEN
            v_id := ql3.raise_alert_v1(
                v_row.id, 'missed', v_row.next_due_at_ms, NULL, NULL, v_row.next_due_at_ms,
                jsonb_build_object('occurrence_ms', v_row.next_due_at_ms,
                                   'bound_ms', v_row.next_due_at_ms + v_margin
                                               + v_row.misfire_grace_ms),
                v_now_ms);
            IF v_id IS NOT NULL THEN
                RETURN QUERY SELECT v_id, 'missed'::text, v_row.id, v_row.next_due_at_ms,
                    NULL::bigint, NULL::bigint, NULL::bigint, NULL::text, NULL::text,
                    NULL::text, NULL::bigint, NULL::bigint, NULL::bigint, NULL::text;
            END IF;
        END IF;
        -- Alerted up to the bound already: no occurrence is left to compute, no row returned.
        v_last := v_row.last_alerted_ms;
        CONTINUE WHEN greatest(v_row.next_due_at_ms, v_last)
                      >= v_now_ms - v_margin - v_row.misfire_grace_ms - 1
                   OR v_row.claim_expires_at_ms > v_now_ms;
        RETURN QUERY SELECT NULL::bigint, 'overdue'::text, v_row.id, NULL::bigint,
            v_row.next_due_at_ms, greatest(v_row.next_due_at_ms, v_last),
            v_now_ms - v_margin - v_row.misfire_grace_ms - 1, v_row.cron, v_row.timezone,
            v_row.misfire_policy, v_row.misfire_grace_ms, v_row.start_at_ms, v_row.end_at_ms,
            v_rules;
    END LOOP;
    FOR v_row IN
        SELECT w.schedule_id, w.checked_ms, s.alert_deadline_ms
        FROM ql3.alert_watermarks AS w
        JOIN ql3.trigger_schedules AS s ON s.id = w.schedule_id
        WHERE w.kind = 'late' AND 'late' = ANY (s.alert_on)
          AND w.checked_ms < v_now_ms - s.alert_deadline_ms
        FOR UPDATE OF w SKIP LOCKED
    LOOP
        RETURN QUERY
        SELECT j.alert_id, j.kind, j.schedule_id, j.subject_key, NULL::bigint, NULL::bigint,
               NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::bigint, NULL::bigint,
               NULL::bigint, NULL::text
        FROM (
        SELECT ql3.raise_alert_v1(
                   v_row.schedule_id, 'late', r.id, r.id, NULL, NULL,
                   jsonb_build_object('run_id', r.id, 'scheduled_for_ms', r.scheduled_for_ms,
                                      'deadline_ms', r.scheduled_for_ms + v_row.alert_deadline_ms),
                   v_now_ms) AS alert_id,
               'late'::text AS kind, v_row.schedule_id AS schedule_id, r.id AS subject_key
        FROM ql3.runs AS r
        WHERE r.schedule_id = v_row.schedule_id
          AND r.scheduled_for_ms > v_row.checked_ms
          AND r.scheduled_for_ms <= v_now_ms - v_row.alert_deadline_ms
          AND NOT EXISTS (
              SELECT 1 FROM ql3.attempts AS a
              WHERE a.run_id = r.id AND a.state = 'succeeded'
                AND a.finished_at_ms <= r.scheduled_for_ms + v_row.alert_deadline_ms
          )
        ) AS j WHERE j.alert_id IS NOT NULL;
        UPDATE ql3.alert_watermarks AS w
            SET checked_ms = v_now_ms - v_row.alert_deadline_ms
            WHERE w.schedule_id = v_row.schedule_id AND w.kind = 'late';
    END LOOP;
END
$$;

-- The missed occurrences a caller computed for one overdue schedule (record_due_alerts_v1's
-- 'overdue' row), recorded once each. Nothing is taken on trust: under the database clock the
-- schedule must still be active and ask for `missed`, its cursor must still be p_cursor_ms
-- (nothing was decided meanwhile), no unexpired claim may hold it (a Coordinator deciding it now
-- writes what happened), the recorded zone rules must be the ones the occurrences were computed
-- with, and each occurrence must lie after the cursor and past its bound. The row is locked FOR
-- SHARE, so a claim or commit of the schedule waits for this (or this for it, and re-checks).
-- At most 1 000 occurrences a call; a longer outage continues at the next call, after the last
-- one recorded. Returns the alerts recorded (the columns of record_due_alerts_v1's first four).
CREATE FUNCTION ql3.record_missed_alerts_v1(
    p_schedule_id bigint, p_cursor_ms bigint, p_zone_rules_version text, p_occurrences bigint[]
) RETURNS TABLE (alert_id bigint, kind text, schedule_id bigint, subject_key bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_margin bigint := ql3.alert_missed_margin_ms();
    v_grace bigint;
BEGIN
    IF coalesce(cardinality(p_occurrences), 0) > 1000 THEN
        RAISE EXCEPTION 'p_occurrences: at most 1000 occurrences a call, got %',
            cardinality(p_occurrences) USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.misfire_grace_ms INTO v_grace
        FROM ql3.trigger_schedules AS s
        WHERE s.id = p_schedule_id AND s.state = 'active' AND 'missed' = ANY (s.alert_on)
          AND s.next_due_at_ms = p_cursor_ms
          AND (s.claim_expires_at_ms IS NULL OR s.claim_expires_at_ms <= v_now_ms)
          AND p_zone_rules_version = (SELECT z.version FROM ql3.zone_rules AS z)
        FOR SHARE OF s;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    RETURN QUERY
    SELECT j.alert_id, 'missed'::text, p_schedule_id, j.occurrence
    FROM (
        SELECT o.occurrence,
               ql3.raise_alert_v1(
                   p_schedule_id, 'missed', o.occurrence, NULL, NULL, o.occurrence,
                   jsonb_build_object('occurrence_ms', o.occurrence,
                                      'bound_ms', o.occurrence + v_margin + v_grace),
                   v_now_ms) AS alert_id
        FROM (SELECT DISTINCT u.occurrence FROM unnest(p_occurrences) AS u (occurrence)) AS o
        WHERE o.occurrence > p_cursor_ms AND o.occurrence + v_margin + v_grace < v_now_ms
    ) AS j
    WHERE j.alert_id IS NOT NULL
    ORDER BY j.occurrence;
END
$$;

-- 5. Alert settings (admin) ----------------------------------------------------------------------

-- Write what schedule p_schedule_id asks for. Each kind turned on (that was off) starts its
-- watermark at the database time: what happened before is not judged, nor alerted about.
CREATE FUNCTION ql3.admin_set_alerts_v1(
    p_schedule_id bigint, p_alert_on text[], p_command text, p_webhook text, p_deadline_ms bigint
) RETURNS void
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_before text[];
BEGIN
    SELECT s.alert_on INTO v_before
        FROM ql3.trigger_schedules AS s WHERE s.id = p_schedule_id FOR UPDATE;
    UPDATE ql3.trigger_schedules AS s
        SET alert_on = coalesce(p_alert_on, '{}'), alert_command = p_command,
            alert_webhook = p_webhook, alert_deadline_ms = p_deadline_ms
        WHERE s.id = p_schedule_id
          AND (s.alert_on, s.alert_command, s.alert_webhook, s.alert_deadline_ms)
              IS DISTINCT FROM (coalesce(p_alert_on, '{}'), p_command, p_webhook, p_deadline_ms);
    INSERT INTO ql3.alert_watermarks AS w (schedule_id, kind, since_ms, checked_ms)
    SELECT p_schedule_id, k.kind, v_now_ms, v_now_ms - 1
    FROM unnest(coalesce(p_alert_on, '{}')) AS k (kind)
    WHERE NOT (k.kind = ANY (coalesce(v_before, '{}')))
    ON CONFLICT (schedule_id, kind)
        DO UPDATE SET since_ms = excluded.since_ms, checked_ms = excluded.checked_ms;
END
$$;

-- 6. Delivery (workers) ------------------------------------------------------------------------

-- Take up to p_limit pending alerts that may be tried now (or whose holder's lease expired),
-- under p_lease_token for p_lease_ms, SKIP LOCKED; the attempt number they are taken for.
CREATE FUNCTION ql3.worker_take_alerts_v1(p_lease_token uuid, p_lease_ms bigint, p_limit integer)
RETURNS TABLE (
    alert_id bigint, kind text, schedule_id bigint, schedule_name text, subject_key bigint,
    run_id bigint, occurrence_ms bigint, detail jsonb, raised_at_ms bigint, command text,
    webhook text, attempt_number integer, taken_at_ms bigint
)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
BEGIN
    PERFORM ql3.worker_check_lease_v1(p_lease_token, p_lease_ms);
    PERFORM ql3.worker_check_limit_v1(p_limit);
    RETURN QUERY
    WITH picked AS (
        SELECT a.id
        FROM ql3.alerts AS a
        WHERE a.delivery_state = 'pending' AND a.next_delivery_at_ms <= v_now_ms
          AND (a.lease_expires_at_ms IS NULL OR a.lease_expires_at_ms <= v_now_ms)
        ORDER BY a.next_delivery_at_ms, a.id
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    )
    UPDATE ql3.alerts AS a
        SET lease_token = p_lease_token, lease_expires_at_ms = v_now_ms + p_lease_ms,
            worker_login = session_user
        FROM picked AS p
        WHERE a.id = p.id
        RETURNING a.id, a.kind, a.schedule_id, a.detail ->> 'schedule', a.subject_key, a.run_id,
                  a.occurrence_ms, a.detail, a.raised_at_ms, a.command, a.webhook,
                  a.delivery_attempts + 1, v_now_ms;
END
$$;

-- Record how the delivery attempt of an alert held under p_lease_token ended. Delivered: the
-- alert is done. Failed: tried again after 1 s * 2^(attempts - 1), at most 5 min, and given up
-- ('failed') after the 10th attempt. Returns the state written, or nothing when the alert is not
-- held under that token by this login (its lease expired and another worker took it).
CREATE FUNCTION ql3.worker_finish_alert_v1(
    p_alert_id bigint, p_lease_token uuid, p_worker_id text, p_started_at_ms bigint,
    p_delivered boolean, p_error text
) RETURNS TABLE (delivery_state text, attempt_number integer, next_delivery_at_ms bigint)
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER
    SET search_path = pg_catalog, ql3, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_now_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
    v_alert ql3.alerts%ROWTYPE;
    v_number integer;
BEGIN
    SELECT * INTO v_alert FROM ql3.alerts AS a
        WHERE a.id = p_alert_id AND a.lease_token = p_lease_token
          AND a.worker_login = session_user AND a.delivery_state = 'pending'
        FOR UPDATE;
    IF v_alert.id IS NULL THEN
        RETURN;
    END IF;
    v_number := v_alert.delivery_attempts + 1;
    INSERT INTO ql3.alert_deliveries (
        alert_id, attempt_number, outcome, error, worker_login, worker_id, started_at_ms,
        finished_at_ms
    )
    VALUES (p_alert_id, v_number, CASE WHEN p_delivered THEN 'delivered' ELSE 'failed' END,
            CASE WHEN p_delivered THEN NULL ELSE left(coalesce(p_error, 'failed'), 4096) END,
            session_user, left(p_worker_id, 200), least(p_started_at_ms, v_now_ms), v_now_ms);
    RETURN QUERY
    UPDATE ql3.alerts AS a
        SET delivery_attempts = v_number, lease_token = NULL, lease_expires_at_ms = NULL,
            delivery_state = CASE WHEN p_delivered THEN 'delivered'
                                  WHEN v_number >= 10 THEN 'failed' ELSE 'pending' END,
            delivered_at_ms = CASE WHEN p_delivered THEN greatest(v_now_ms, a.raised_at_ms) END,
            next_delivery_at_ms = CASE WHEN p_delivered THEN a.next_delivery_at_ms
                ELSE v_now_ms + least(300000, 1000 * (2 ^ (v_number - 1))::bigint) END
        WHERE a.id = p_alert_id
        RETURNING a.delivery_state, a.delivery_attempts, a.next_delivery_at_ms;
END
$$;

-- 7. Grants -------------------------------------------------------------------------------------

GRANT SELECT ON ql3.alerts, ql3.alert_deliveries, ql3.alert_watermarks
    TO ql3_admin, ql3_runtime, ql3_worker_ingress;
REVOKE ALL ON FUNCTION
    ql3.alert_missed_margin_ms(),
    ql3.raise_alert_v1(bigint, text, bigint, bigint, bigint, bigint, jsonb, bigint),
    ql3.alert_failed_v1(),
    ql3.alert_paused_v1(),
    ql3.record_due_alerts_v1(),
    ql3.record_missed_alerts_v1(bigint, bigint, text, bigint[]),
    ql3.admin_set_alerts_v1(bigint, text[], text, text, bigint),
    ql3.worker_take_alerts_v1(uuid, bigint, integer),
    ql3.worker_finish_alert_v1(bigint, uuid, text, bigint, boolean, text)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ql3.alert_missed_margin_ms() TO ql3_admin, ql3_runtime, ql3_worker_ingress;
GRANT EXECUTE ON FUNCTION
    ql3.record_due_alerts_v1(),
    ql3.record_missed_alerts_v1(bigint, bigint, text, bigint[])
    TO ql3_runtime, ql3_worker_ingress;
GRANT EXECUTE ON FUNCTION ql3.admin_set_alerts_v1(bigint, text[], text, text, bigint) TO ql3_admin;
GRANT EXECUTE ON FUNCTION
    ql3.worker_take_alerts_v1(uuid, bigint, integer),
    ql3.worker_finish_alert_v1(bigint, uuid, text, bigint, boolean, text)
    TO ql3_worker_ingress;
