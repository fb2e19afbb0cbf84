"""The least-privilege matrix of DESIGN §11 as data: what each role may do to each ql3 table.

`PROBES` holds, per table, one statement per kind of access (SELECT, INSERT, UPDATE of each
column group, DELETE, TRUNCATE); `ALLOWED` says which roles the design grants each of them.
roles/test_role_matrix.py runs every probe as every role's login user; a migration that adds a
table or a grant extends both tables here.
"""

from __future__ import annotations

from typing import Final

from ql3_cluster_postgres import ROLE_NAMES

__all__ = ["ALLOWED", "PROBES", "PUBLIC", "ROLES", "allowed"]

# A login user in no QL3 group that was explicitly allowed to connect.
PUBLIC: Final = "public"
ROLES: Final = (*ROLE_NAMES, PUBLIC)

# table -> probe -> SQL. UPDATEs assign columns to themselves (or a valid constant) on real rows;
# DELETEs target real rows without dependents; INSERTs write valid new rows.
PROBES: Final[dict[str, dict[str, str]]] = {
    "tasks": {
        "select": "SELECT * FROM ql3.tasks",
        # What the web console reads (migration 0014): the observer has these columns alone.
        "select:console": "SELECT id, name, overlap, max_running FROM ql3.tasks",
        "insert": "INSERT INTO ql3.tasks (name, created_at_ms) VALUES ('probe', 0)",
        "update:definition": "UPDATE ql3.tasks SET name = name, payload_template = '{}'"
        " WHERE id = %(task)s",
        "update:execution": "UPDATE ql3.tasks SET command = 'true', max_attempts = max_attempts,"
        " timeout_ms = timeout_ms, retry_backoff_ms = retry_backoff_ms WHERE id = %(task)s",
        "update:identity": "UPDATE ql3.tasks SET created_at_ms = created_at_ms WHERE id = %(task)s",
        "delete": "DELETE FROM ql3.tasks WHERE id = %(lonely_task)s",
        "truncate": "TRUNCATE ql3.tasks CASCADE",
    },
    "triggers": {
        "select": "SELECT * FROM ql3.triggers",
        "insert": "INSERT INTO ql3.triggers (task_id, created_at_ms) VALUES (%(task)s, 0)",
        "update:definition": "UPDATE ql3.triggers SET enabled = false WHERE id = %(trigger)s",
        "update:identity": "UPDATE ql3.triggers SET task_id = task_id, kind = kind,"
        " created_at_ms = created_at_ms WHERE id = %(trigger)s",
        "delete": "DELETE FROM ql3.triggers WHERE id = %(spare_trigger)s",
        "truncate": "TRUNCATE ql3.triggers CASCADE",
    },
    "trigger_schedules": {
        "select": "SELECT * FROM ql3.trigger_schedules",
        "select:console": "SELECT id, task_id, cron, timezone, misfire_policy, misfire_grace_ms,"
        " start_at_ms, end_at_ms, state, next_due_at_ms, claim_owner_id, claim_expires_at_ms,"
        " version, updated_at_ms, created_at_ms, invalid_reason, invalidated_at_ms"
        " FROM ql3.trigger_schedules",
        "insert:definition": "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron,"
        " next_due_at_ms, updated_at_ms, created_at_ms)"
        " VALUES (%(spare_trigger)s, %(task)s, '* * * * *', 0, 0, 0)",
        "insert:claim": "INSERT INTO ql3.trigger_schedules (trigger_id, task_id, cron,"
        " next_due_at_ms, claim_owner_id, claim_token, claim_expires_at_ms, updated_at_ms,"
        " created_at_ms) VALUES (%(spare_trigger)s, %(task)s, '* * * * *', 0, 'probe',"
        " gen_random_uuid(), 1000, 0, 0)",
        "update:definition": "UPDATE ql3.trigger_schedules SET cron = cron, timezone = timezone,"
        " misfire_policy = misfire_policy, misfire_grace_ms = misfire_grace_ms,"
        " start_at_ms = start_at_ms, end_at_ms = end_at_ms WHERE id = %(schedule)s",
        "update:cursor": "UPDATE ql3.trigger_schedules SET state = state,"
        " next_due_at_ms = next_due_at_ms, version = version + 1, updated_at_ms = updated_at_ms"
        " WHERE id = %(schedule)s",
        "update:claim": "UPDATE ql3.trigger_schedules SET claim_owner_id = claim_owner_id,"
        " claim_token = claim_token, claim_expires_at_ms = claim_expires_at_ms"
        " WHERE id = %(schedule)s",
        "update:quarantine": "UPDATE ql3.trigger_schedules SET invalid_reason = invalid_reason,"
        " invalidated_at_ms = invalidated_at_ms WHERE id = %(schedule)s",
        "update:identity": "UPDATE ql3.trigger_schedules SET trigger_id = trigger_id,"
        " task_id = task_id, created_at_ms = created_at_ms WHERE id = %(schedule)s",
        "update:pause_after_failures": "UPDATE ql3.trigger_schedules"
        " SET pause_after_failures = 3 WHERE id = %(schedule)s",
        "delete": "DELETE FROM ql3.trigger_schedules WHERE id = %(schedule)s",
        "truncate": "TRUNCATE ql3.trigger_schedules",
    },
    "runs": {
        "select": "SELECT * FROM ql3.runs",
        "select:console": "SELECT id, schedule_id, task_id, scheduled_for_ms, owner_id,"
        " created_at_ms, kind FROM ql3.runs",
        "insert": "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id,"
        " claim_token, created_at_ms)"
        " VALUES (%(schedule)s, %(task)s, 5, 'probe', gen_random_uuid(), 5)",
        "update:all": "UPDATE ql3.runs SET schedule_id = schedule_id, task_id = task_id,"
        " scheduled_for_ms = scheduled_for_ms, owner_id = owner_id, claim_token = claim_token,"
        " created_at_ms = created_at_ms WHERE id = %(run)s",
        # A manual Run written directly: only through ql3.admin_trigger_run_v1 (migration 0008).
        "insert:manual": "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id,"
        " claim_token, created_at_ms, kind, request_id)"
        " VALUES (%(schedule)s, %(task)s, 6, 'probe', gen_random_uuid(), 6, 'manual', 'probe')",
        "execute:trigger": "SELECT * FROM ql3.admin_trigger_run_v1("
        "(SELECT name FROM ql3.tasks WHERE id = %(task)s), 'probe-trigger', NULL)",
        # A backfilled Run written directly: only through ql3.admin_backfill_batch_v1 (0011).
        "insert:backfill": "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms,"
        " owner_id, claim_token, created_at_ms, kind, backfill_id, supersedes_skip_id)"
        " VALUES (%(schedule)s, %(task)s, 7, 'probe', gen_random_uuid(), 7, 'backfill',"
        " %(backfill)s, %(skip)s)",
        # One empty batch: records a request (migration 0011), admits nothing.
        "execute:backfill": "SELECT * FROM ql3.admin_backfill_batch_v1("
        "(SELECT name FROM ql3.tasks WHERE id = %(task)s), 'probe-backfill', 0, 0, false,"
        " '{}'::bigint[], '{}'::bigint[], true)",
        "delete": "DELETE FROM ql3.runs WHERE id = %(run)s",
        "truncate": "TRUNCATE ql3.runs",
    },
    "attempts": {
        "select": "SELECT * FROM ql3.attempts",
        "select:console": "SELECT id, run_id, attempt_number, state, created_at_ms, updated_at_ms,"
        " not_before_ms, worker_id, worker_login, lease_expires_at_ms, started_at_ms,"
        " finished_at_ms, exit_code, output_tail FROM ql3.attempts",
        # A successor as a worker queues it (the seeded attempt ended first: one live per run).
        "insert": "INSERT INTO ql3.attempts (run_id, attempt_number, state, not_before_ms,"
        " created_at_ms, updated_at_ms) VALUES (%(run)s, 2, 'failed', 0, 0, 0)",
        "insert:lease": "INSERT INTO ql3.attempts (run_id, attempt_number, state, worker_id,"
        " lease_token, started_at_ms, lease_expires_at_ms, created_at_ms, updated_at_ms)"
        " VALUES (%(run)s, 3, 'failed', 'probe', NULL, 0, NULL, 0, 0)",
        "update:state": "UPDATE ql3.attempts SET state = 'running', updated_at_ms = updated_at_ms,"
        " worker_id = 'probe', worker_login = 'probe', lease_token = %(probe_token)s,"
        " taken_lease_token = %(probe_token)s, started_at_ms = 1, lease_expires_at_ms = 2"
        " WHERE id = %(attempt)s",
        "update:outcome": "UPDATE ql3.attempts SET exit_code = exit_code,"
        " output_tail = output_tail, finished_at_ms = finished_at_ms WHERE id = %(attempt)s",
        "update:holder": "UPDATE ql3.attempts SET worker_login = worker_login,"
        " taken_lease_token = taken_lease_token WHERE id = %(attempt)s",
        "update:identity": "UPDATE ql3.attempts SET run_id = run_id,"
        " attempt_number = attempt_number, created_at_ms = created_at_ms,"
        " not_before_ms = not_before_ms WHERE id = %(attempt)s",
        "delete": "DELETE FROM ql3.attempts WHERE id = %(attempt)s",
        "truncate": "TRUNCATE ql3.attempts",
    },
    "events": {
        "select": "SELECT * FROM ql3.events",
        "insert": "INSERT INTO ql3.events (run_id, attempt_id, kind, created_at_ms)"
        " VALUES (%(run)s, %(attempt)s, 'probe', 0)",
        "update:all": "UPDATE ql3.events SET run_id = run_id, attempt_id = attempt_id,"
        " kind = kind, payload = payload, created_at_ms = created_at_ms WHERE id = %(event)s",
        "delete": "DELETE FROM ql3.events WHERE id = %(event)s",
        "truncate": "TRUNCATE ql3.events",
    },
    # One row, recorded when the template was migrated (prepare_ql3_database).
    "zone_rules": {
        "select": "SELECT * FROM ql3.zone_rules",
        "select:console": "SELECT version, recorded_at_ms FROM ql3.zone_rules",
        "upsert": "INSERT INTO ql3.zone_rules (version, recorded_at_ms, recorded_by)"
        " VALUES ('probe', 0, 'probe') ON CONFLICT (singleton) DO UPDATE"
        " SET version = excluded.version, recorded_at_ms = excluded.recorded_at_ms,"
        " recorded_by = excluded.recorded_by",
        "update:rules": "UPDATE ql3.zone_rules SET version = version,"
        " recorded_at_ms = recorded_at_ms, recorded_by = recorded_by",
        "update:identity": "UPDATE ql3.zone_rules SET singleton = singleton",
        # What a commit does to order itself with an adopt (migrations/0006).
        "lock": "SELECT version FROM ql3.zone_rules FOR KEY SHARE",
        "delete": "DELETE FROM ql3.zone_rules",
        "truncate": "TRUNCATE ql3.zone_rules",
    },
    # The seed stores a version 'seed' (zone UTC) and supersedes every history row, so that a
    # probe may insert the one current row.
    "zone_rule_data": {
        "select": "SELECT * FROM ql3.zone_rule_data",
        "insert": "INSERT INTO ql3.zone_rule_data (version, zone, tzif)"
        " SELECT 'seed', 'Etc/UTC', tzif FROM ql3.zone_rule_data"
        " WHERE version = 'seed' AND zone = 'UTC'",
        "update:all": "UPDATE ql3.zone_rule_data SET version = version, zone = zone, tzif = tzif"
        " WHERE version = 'seed' AND zone = 'UTC'",
        "delete": "DELETE FROM ql3.zone_rule_data WHERE version = 'seed' AND zone = 'UTC'",
        "truncate": "TRUNCATE ql3.zone_rule_data",
    },
    "zone_rule_versions": {
        "select": "SELECT * FROM ql3.zone_rule_versions",
        "insert": "INSERT INTO ql3.zone_rule_versions (version, took_effect_at_ms, recorded_by)"
        " VALUES ('probe', 5, 'probe')",
        "update:superseded": "UPDATE ql3.zone_rule_versions SET superseded_at_ms ="
        " superseded_at_ms WHERE seq = %(zone_version)s",
        "update:identity": "UPDATE ql3.zone_rule_versions SET version = version,"
        " took_effect_at_ms = took_effect_at_ms, recorded_by = recorded_by"
        " WHERE seq = %(zone_version)s",
        "delete": "DELETE FROM ql3.zone_rule_versions WHERE seq = %(zone_version)s",
        "truncate": "TRUNCATE ql3.zone_rule_versions",
    },
    # Paused spans (migration 0010): written only through the SECURITY DEFINER functions.
    "schedule_pauses": {
        "select": "SELECT * FROM ql3.schedule_pauses",
        "select:console": "SELECT id, schedule_id, paused_at_ms, paused_by, reason, until_ms,"
        " cause, resumed_at_ms FROM ql3.schedule_pauses",
        "insert": "INSERT INTO ql3.schedule_pauses (schedule_id, paused_at_ms, paused_by)"
        " VALUES (%(schedule)s, 7, 'probe')",
        "update:all": "UPDATE ql3.schedule_pauses SET reason = reason, until_ms = until_ms,"
        " paused_at_ms = paused_at_ms, paused_by = paused_by WHERE id = %(pause)s",
        "execute:pause": "SELECT * FROM ql3.admin_pause_v1("
        "(SELECT name FROM ql3.tasks WHERE id = %(task)s), 'probe', NULL, NULL)",
        "execute:resume": "SELECT ql3.resume_pause_v1(%(schedule)s, 0, 0, NULL, NULL, 0, NULL,"
        " 'exhausted', 'skip', false, 'probe')",
        "delete": "DELETE FROM ql3.schedule_pauses WHERE id = %(pause)s",
        "truncate": "TRUNCATE ql3.schedule_pauses",
    },
    "skipped_occurrences": {
        "select": "SELECT * FROM ql3.skipped_occurrences",
        "select:console": "SELECT id, schedule_id, first_skipped_ms, last_skipped_ms,"
        " skipped_count, misfire_policy, reason, owner_id, created_at_ms"
        " FROM ql3.skipped_occurrences",
        "insert": "INSERT INTO ql3.skipped_occurrences (schedule_id, first_skipped_ms,"
        " last_skipped_ms, skipped_count, misfire_policy, claim_acquired_at_ms, owner_id,"
        " claim_token, created_at_ms)"
        " VALUES (%(schedule)s, 1, 1, 1, 'skip', 2, 'probe', gen_random_uuid(), 2)",
        "insert:zone_rules": "INSERT INTO ql3.skipped_occurrences (schedule_id,"
        " first_skipped_ms, last_skipped_ms, skipped_count, reason, zone_rules_from,"
        " zone_rules_to, created_at_ms)"
        " VALUES (%(schedule)s, 1, 1, 1, 'zone_rules_changed', 'old', 'new', 2)",
        "update:all": "UPDATE ql3.skipped_occurrences SET schedule_id = schedule_id,"
        " first_skipped_ms = first_skipped_ms, last_skipped_ms = last_skipped_ms,"
        " skipped_count = skipped_count, misfire_policy = misfire_policy,"
        " claim_acquired_at_ms = claim_acquired_at_ms, owner_id = owner_id,"
        " claim_token = claim_token, created_at_ms = created_at_ms WHERE id = %(skip)s",
        "delete": "DELETE FROM ql3.skipped_occurrences WHERE id = %(skip)s",
        "truncate": "TRUNCATE ql3.skipped_occurrences",
    },
    "backfills": {
        "select": "SELECT * FROM ql3.backfills",
        "insert": "INSERT INTO ql3.backfills (request_id, schedule_id, from_ms, to_ms,"
        " include_before_creation, requested_by, requested_at_ms, updated_at_ms)"
        " VALUES ('probe', %(schedule)s, 0, 0, false, 'probe', 0, 0)",
        "update:all": "UPDATE ql3.backfills SET admitted = admitted, already_run = already_run,"
        " batches = batches, state = state, updated_at_ms = updated_at_ms"
        " WHERE id = %(backfill)s",
        "delete": "DELETE FROM ql3.backfills WHERE id = %(backfill)s",
        "truncate": "TRUNCATE ql3.backfills",
    },
    # Pruning history (migration 0012): only the owner's SECURITY DEFINER function deletes;
    # EXECUTE is the admin's alone. A dry run of a hundred years writes nothing.
    "history_checkpoints": {
        "select": "SELECT * FROM ql3.history_checkpoints",
        "insert": "INSERT INTO ql3.history_checkpoints (schedule_id, seq, covered_below_ms,"
        " cutoff_ms, runs_by_kind, skip_records_by_reason, skipped_by_reason, attempts_by_state,"
        " events, pauses, backfills, previous_hash, hash, pruned_by, created_at_ms)"
        " VALUES (%(schedule)s, 2, 1, 1, '{}', '{}', '{}', '{}', 0, 0, 0, '\\x00', '\\x00',"
        " 'probe', 0)",
        "update:all": "UPDATE ql3.history_checkpoints SET runs_by_kind = runs_by_kind,"
        " hash = hash, previous_hash = previous_hash WHERE id = %(checkpoint)s",
        "execute:prune": "SELECT count(*) FROM ql3.admin_prune_history_v1(3153600000000, 1, true)",
        "execute:floor": "SELECT ql3.history_prune_floor_ms()",
        "delete": "DELETE FROM ql3.history_checkpoints WHERE id = %(checkpoint)s",
        "truncate": "TRUNCATE ql3.history_checkpoints",
    },
    # Alerts (migration 0013): written only through SECURITY DEFINER functions and triggers.
    "alerts": {
        "select": "SELECT * FROM ql3.alerts",
        "select:console": "SELECT id, schedule_id, kind, subject_key, run_id, pause_id,"
        " occurrence_ms, raised_at_ms, raised_by, delivery_state, delivery_attempts,"
        " delivered_at_ms FROM ql3.alerts",
        "insert": "INSERT INTO ql3.alerts (schedule_id, kind, subject_key, occurrence_ms,"
        " raised_at_ms, raised_by, next_delivery_at_ms) VALUES (%(schedule)s, 'missed', 7, 7, 7,"
        " 'probe', 7)",
        "update:delivery": "UPDATE ql3.alerts SET delivery_state = delivery_state,"
        " delivery_attempts = delivery_attempts, next_delivery_at_ms = next_delivery_at_ms,"
        " lease_token = lease_token, lease_expires_at_ms = lease_expires_at_ms"
        " WHERE id = %(alert)s",
        "execute:record": "SELECT count(*) FROM ql3.record_due_alerts_v1()",
        "execute:record_missed": "SELECT count(*) FROM ql3.record_missed_alerts_v1(%(schedule)s,"
        " 7, 'probe', ARRAY[8]::bigint[])",
        "execute:take": "SELECT count(*) FROM ql3.worker_take_alerts_v1(gen_random_uuid(),"
        " 30000, 1)",
        "execute:finish": "SELECT count(*) FROM ql3.worker_finish_alert_v1(%(alert)s,"
        " gen_random_uuid(), 'probe', 0, true, NULL)",
        "execute:settings": "SELECT ql3.admin_set_alerts_v1(%(schedule)s, ARRAY['failed'],"
        " NULL, NULL, NULL)",
        "delete": "DELETE FROM ql3.alerts WHERE id = %(alert)s",
        "truncate": "TRUNCATE ql3.alerts",
    },
    "alert_deliveries": {
        "select": "SELECT * FROM ql3.alert_deliveries",
        "insert": "INSERT INTO ql3.alert_deliveries (alert_id, attempt_number, outcome,"
        " worker_login, worker_id, started_at_ms, finished_at_ms)"
        " VALUES (%(alert)s, 9, 'delivered', 'probe', 'probe', 7, 7)",
        "update:all": "UPDATE ql3.alert_deliveries SET outcome = outcome, error = error"
        " WHERE id = %(delivery)s",
        "delete": "DELETE FROM ql3.alert_deliveries WHERE id = %(delivery)s",
        "truncate": "TRUNCATE ql3.alert_deliveries",
    },
    "alert_watermarks": {
        "select": "SELECT * FROM ql3.alert_watermarks",
        "insert": "INSERT INTO ql3.alert_watermarks (schedule_id, kind, since_ms, checked_ms)"
        " VALUES (-1, 'late', 7, 7)",
        "update:all": "UPDATE ql3.alert_watermarks SET since_ms = since_ms,"
        " checked_ms = checked_ms WHERE schedule_id = %(schedule)s AND kind = 'late'",
        "delete": "DELETE FROM ql3.alert_watermarks WHERE schedule_id = %(schedule)s",
        "truncate": "TRUNCATE ql3.alert_watermarks",
    },
    "schedule_revisions": {
        "select": "SELECT * FROM ql3.schedule_revisions",
        "insert": "INSERT INTO ql3.schedule_revisions (schedule_id, revision, reason, cron,"
        " timezone, misfire_policy, misfire_grace_ms, first_cursor_ms, created_at_ms)"
        " VALUES (%(schedule)s, 2, 'redefined', '* * * * *', 'UTC', 'fire_once', 0, 0, 0)",
        "update:end": "UPDATE ql3.schedule_revisions SET end_cursor_ms = end_cursor_ms,"
        " ended_at_ms = ended_at_ms WHERE schedule_id = %(schedule)s AND revision = 1",
        "update:definition": "UPDATE ql3.schedule_revisions SET reason = reason, cron = cron,"
        " timezone = timezone, misfire_policy = misfire_policy,"
        " misfire_grace_ms = misfire_grace_ms, start_at_ms = start_at_ms,"
        " end_at_ms = end_at_ms, first_cursor_ms = first_cursor_ms,"
        " placed_after_ms = placed_after_ms, created_at_ms = created_at_ms"
        " WHERE schedule_id = %(schedule)s AND revision = 1",
        "delete": "DELETE FROM ql3.schedule_revisions WHERE schedule_id = %(schedule)s",
        "truncate": "TRUNCATE ql3.schedule_revisions",
    },
    # The recorded `ql3 verify --record` verdicts (migration 0014): the admin writes the verdict,
    # the database stamps when and who.
    "verify_results": {
        "select": "SELECT * FROM ql3.verify_results",
        "insert": "INSERT INTO ql3.verify_results (checked_at_ms, ok, schedules, runs,"
        " violation_total, violation_counts, violations) VALUES (1, true, 0, 0, 0, '{}', '[]')",
        "insert:stamped": "INSERT INTO ql3.verify_results (recorded_at_ms, recorded_by,"
        " checked_at_ms, ok, schedules, runs, violation_total, violation_counts, violations)"
        " VALUES (1, 'probe', 1, true, 0, 0, 0, '{}', '[]')",
        "update:all": "UPDATE ql3.verify_results SET ok = ok, checked_at_ms = checked_at_ms"
        " WHERE id = %(verdict)s",
        "delete": "DELETE FROM ql3.verify_results WHERE id = %(verdict)s",
        "truncate": "TRUNCATE ql3.verify_results",
    },
    "schema_migrations": {
        "select": "SELECT * FROM ql3.schema_migrations",
        "insert": "INSERT INTO ql3.schema_migrations (name, version, sha256, applied_at_ms)"
        " VALUES ('9999_probe.sql', 9999, repeat('0', 64), 0)",
        "update:all": "UPDATE ql3.schema_migrations SET name = name, version = version,"
        " sha256 = sha256, applied_at_ms = applied_at_ms WHERE version = 1",
        "delete": "DELETE FROM ql3.schema_migrations WHERE version = 1",
        "truncate": "TRUNCATE ql3.schema_migrations",
    },
}

_READERS = frozenset({"owner", "admin", "runtime", "worker_ingress"})
# The web console's reader (migration 0014) reads the columns it shows and nothing else: never
# `SELECT *` of a table holding fencing tokens, commands or payloads.
_CONSOLE = frozenset({"owner", "admin", "runtime", "observer"})
# The design (migrations 0002 to 0014): (table, probe) -> roles allowed.
# Anything absent is allowed to the owner only. ql3_worker_ingress reads attempts and events but
# writes them only through its functions (test_worker_fences.py probes those).
ALLOWED: Final[dict[tuple[str, str], frozenset[str]]] = {
    ("tasks", "select"): _READERS,
    ("tasks", "insert"): frozenset({"owner", "admin"}),
    ("tasks", "update:definition"): frozenset({"owner", "admin"}),
    ("tasks", "update:execution"): frozenset({"owner", "admin"}),
    ("triggers", "select"): frozenset({"owner", "admin", "runtime"}),
    ("triggers", "insert"): frozenset({"owner", "admin"}),
    ("triggers", "update:definition"): frozenset({"owner", "admin"}),
    ("trigger_schedules", "select"): frozenset({"owner", "admin", "runtime"}),
    ("trigger_schedules", "insert:definition"): frozenset({"owner", "admin"}),
    ("trigger_schedules", "update:definition"): frozenset({"owner", "admin"}),
    ("trigger_schedules", "update:cursor"): frozenset({"owner", "admin", "runtime"}),
    ("trigger_schedules", "update:claim"): frozenset({"owner", "runtime"}),
    ("trigger_schedules", "update:quarantine"): frozenset({"owner", "admin", "runtime"}),
    ("runs", "select"): _READERS,
    ("runs", "insert"): frozenset({"owner", "runtime"}),
    # Trigger now: the admin through the SECURITY DEFINER function only, never a direct INSERT.
    ("runs", "execute:trigger"): frozenset({"owner", "admin"}),
    # Backfill: the admin through the SECURITY DEFINER function only (migration 0011).
    ("runs", "execute:backfill"): frozenset({"owner", "admin"}),
    ("backfills", "select"): frozenset({"owner", "admin"}),
    ("attempts", "select"): _READERS,
    ("attempts", "insert"): frozenset({"owner", "runtime"}),
    ("attempts", "insert:lease"): frozenset({"owner", "runtime"}),
    ("events", "select"): _READERS,
    ("events", "insert"): frozenset({"owner", "runtime"}),
    ("skipped_occurrences", "select"): frozenset({"owner", "admin", "runtime"}),
    ("skipped_occurrences", "insert"): frozenset({"owner", "runtime"}),
    # An adopt's records of what the old zone rules had due; the runtime may not name versions.
    ("skipped_occurrences", "insert:zone_rules"): frozenset({"owner", "admin"}),
    # Spans are written by the pause and resume functions alone (migration 0010): the admin
    # pauses and resumes; the runtime resumes spans whose until has come.
    ("schedule_pauses", "select"): frozenset({"owner", "admin", "runtime"}),
    ("schedule_pauses", "execute:pause"): frozenset({"owner", "admin"}),
    ("schedule_pauses", "execute:resume"): frozenset({"owner", "admin", "runtime"}),
    ("trigger_schedules", "update:pause_after_failures"): frozenset({"owner", "admin"}),
    # Retention: the admin reads checkpoints and prunes through the function alone; DELETE on
    # runs, attempts, events and skip records stays the owner's (the probes above).
    ("history_checkpoints", "select"): frozenset({"owner", "admin"}),
    ("history_checkpoints", "execute:prune"): frozenset({"owner", "admin"}),
    ("history_checkpoints", "execute:floor"): frozenset({"owner", "admin"}),
    # Alerts (migration 0013): every reader reads them; the functions alone write them. Any
    # Coordinator or worker records due alerts; workers deliver; the admin sets what is asked.
    ("alerts", "select"): _READERS,
    ("alerts", "execute:record"): frozenset({"owner", "runtime", "worker_ingress"}),
    ("alerts", "execute:record_missed"): frozenset({"owner", "runtime", "worker_ingress"}),
    ("alerts", "execute:take"): frozenset({"owner", "worker_ingress"}),
    ("alerts", "execute:finish"): frozenset({"owner", "worker_ingress"}),
    ("alerts", "execute:settings"): frozenset({"owner", "admin"}),
    ("alerts", "select:console"): _READERS | {"observer"},
    ("alert_deliveries", "select"): _READERS,
    ("alert_watermarks", "select"): _READERS,
    ("schedule_revisions", "select"): frozenset({"owner", "admin"}),
    ("schedule_revisions", "insert"): frozenset({"owner", "admin"}),
    ("schedule_revisions", "update:end"): frozenset({"owner", "admin"}),
    ("schema_migrations", "select"): _READERS | {"observer"},
    ("zone_rules", "select"): frozenset({"owner", "admin", "runtime"}),
    ("zone_rules", "upsert"): frozenset({"owner", "admin"}),
    ("zone_rules", "update:rules"): frozenset({"owner", "admin"}),
    # The runtime's only write privilege here (`singleton`, whose one allowed value it holds) is
    # what PostgreSQL asks for the FOR KEY SHARE lock a commit takes.
    ("zone_rules", "update:identity"): frozenset({"owner", "runtime"}),
    ("zone_rules", "lock"): frozenset({"owner", "admin", "runtime"}),
    ("zone_rule_data", "select"): frozenset({"owner", "admin", "runtime"}),
    ("zone_rule_data", "insert"): frozenset({"owner", "admin"}),
    ("zone_rule_versions", "select"): frozenset({"owner", "admin", "runtime"}),
    ("zone_rule_versions", "insert"): frozenset({"owner", "admin"}),
    ("zone_rule_versions", "update:superseded"): frozenset({"owner", "admin"}),
    ("tasks", "select:console"): _READERS | {"observer"},
    ("trigger_schedules", "select:console"): _CONSOLE,
    ("runs", "select:console"): _READERS | {"observer"},
    ("attempts", "select:console"): _READERS | {"observer"},
    ("skipped_occurrences", "select:console"): _CONSOLE,
    ("schedule_pauses", "select:console"): _CONSOLE,
    ("zone_rules", "select:console"): _CONSOLE,
    ("verify_results", "select"): frozenset({"owner", "admin", "observer"}),
    ("verify_results", "insert"): frozenset({"owner", "admin"}),
}


def allowed(table: str, probe: str) -> frozenset[str]:
    """Return the roles the design grants `probe` on `table` (the owner alone if unnamed)."""
    return ALLOWED.get((table, probe), frozenset({"owner"}))
