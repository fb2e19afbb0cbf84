"""Every `ql3` verb end to end as a real process against real PostgreSQL, including error paths."""

from __future__ import annotations

import json
import subprocess
import uuid
from datetime import UTC, datetime
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import psycopg
from fix_db import clean_env, db_now_ms, ql3_executable, ql3_fails, ql3_ok, run_ql3, sql_rows
from psycopg import sql
from ql3_testkit import Ql3Database, ThrowawayCluster, drop_database


def ql3_runtime_dsn(cluster: ThrowawayCluster, dbname: str) -> str:
    """Return the DSN of the cluster-wide runtime login user on `dbname`."""
    return Ql3Database(name=dbname, superuser_dsn=cluster.dsn(dbname)).dsn("runtime")


def test_roles_provision_and_migrate_a_fresh_database(pg_cluster: ThrowawayCluster) -> None:
    """`ql3 roles provision` then `ql3 migrate` make an empty database ready; both idempotent."""
    name = "cc_cli_fresh"
    sql_rows(pg_cluster.dsn(), f'CREATE DATABASE "{name}"')
    try:
        dsn = pg_cluster.dsn(name)
        assert "ql3_runtime" in ql3_ok("roles", "provision", "--dsn", dsn)
        ql3_ok("roles", "provision", "--dsn", dsn)
        applied = ql3_ok("migrate", "--dsn", dsn)
        assert "applied 0001_create_schema" in applied
        assert "recorded zone rules tzdata" in applied
        again = ql3_ok("migrate", "--dsn", dsn)
        assert "up to date" in again
        assert "already recorded" in again
        # Provisioning needs a role that may create roles; the runtime login may not.
        ql3_fails(1, "roles", "provision", "--dsn", ql3_runtime_dsn(pg_cluster, name))
        groups = sql_rows(
            dsn, "SELECT rolname FROM pg_roles WHERE rolname LIKE 'ql3\\_%' ORDER BY 1"
        )
        assert {"ql3_admin", "ql3_owner", "ql3_runtime", "ql3_worker_ingress"} <= {
            row[0] for row in groups
        }
    finally:
        drop_database(pg_cluster, name)


def test_migrate_by_a_superuser_provisions_a_fresh_cluster_in_one_command() -> None:
    """On a cluster without QL3 roles, `ql3 migrate` as a superuser provisions, says so, migrates.

    A plain login and a CREATEROLE login are refused first, naming `ql3 roles provision`, and
    create nothing.
    """
    password = uuid.uuid4().hex
    with ThrowawayCluster(name="cc-fresh") as cluster:
        for statement in (
            "CREATE DATABASE fresh",
            "CREATE ROLE plain LOGIN PASSWORD {}",
            "CREATE ROLE creator LOGIN CREATEROLE PASSWORD {}",
        ):
            with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
                conn.execute(sql.SQL(statement).format(sql.Literal(password)))
        groups = "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'ql3\\_%%'"
        for user in ("plain", "creator"):
            line = ql3_fails(
                1, "migrate", "--dsn", cluster.dsn("fresh", user=user, password=password)
            )
            assert "run `ql3 roles provision` as a superuser first" in line
            assert "provision-roles" not in line
        assert sql_rows(cluster.dsn(), groups) == [(0,)]
        out = ql3_ok("migrate", "--dsn", cluster.dsn("fresh")).splitlines()
        provisioned = [line for line in out if line.startswith("provisioned: ")]
        assert provisioned[:5] == [
            f"provisioned: created role {name} (NOLOGIN group)"
            for name in (
                "ql3_owner",
                "ql3_admin",
                "ql3_runtime",
                "ql3_worker_ingress",
                "ql3_observer",
            )
        ]
        assert "provisioned: created schema ql3, owned by ql3_owner" in provisioned
        assert "applied 0001_create_schema.sql" in out
        assert any(line.startswith("recorded zone rules tzdata") for line in out)
        assert sql_rows(cluster.dsn(), groups) == [(5,)]
        again = ql3_ok("migrate", "--dsn", cluster.dsn("fresh"))
        assert "provisioned" not in again
        assert "schema is up to date" in again


def test_numbers_and_names_out_of_bounds_exit_2_and_write_nothing(ql3_db: Ql3Database) -> None:
    """A grace past 7 days, a 20-digit grace or a name with a tab and a BEL: exit 2, no row."""
    dsn = ql3_db.dsn("admin")
    add = ("schedule", "add", "x", "--cron", "* * * * *", "--dsn", dsn)
    for grace in ("99999999999999999999", "604800001"):
        line = ql3_fails(2, *add, "--grace-ms", grace)
        assert "--grace-ms" in line
        assert "604800000" in line
    assert "must be printable" in ql3_fails(
        2, "schedule", "add", "a\tb\x07", "--cron", "* * * * *", "--dsn", dsn
    )
    assert "must not begin or end with whitespace" in ql3_fails(
        2, "schedule", "add", "   ", "--cron", "* * * * *", "--dsn", dsn
    )
    assert "since_ms: must be within" in ql3_fails(2, "verify", "--since-ms", "-1", "--dsn", dsn)
    assert json.loads(ql3_ok("schedule", "list", "--json", "--dsn", dsn)) == []
    assert sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.tasks") == [(0,)]


def test_schedule_list_keeps_one_line_per_schedule_for_a_hand_written_name(
    ql3_db: Ql3Database,
) -> None:
    """A name written by hand with a tab, a newline and markup still lists as one table row."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "plain", "--cron", "0 * * * *", "--dsn", dsn)
    ql3_ok("schedule", "add", "odd", "--cron", "0 * * * *", "--dsn", dsn)
    sql_rows(
        ql3_db.superuser_dsn,
        "UPDATE ql3.tasks SET name = %s WHERE name = 'odd'",
        ["odd\tname\nwith [/] markup\x07"],
    )
    lines = ql3_ok("schedule", "list", "--dsn", dsn).splitlines()
    assert len(lines) == 3, lines
    assert "odd\\tname\\nwith [/] markup\\x07" in lines[1]


def test_schedule_verbs_end_to_end(ql3_db: Ql3Database) -> None:
    """Add, list, pause, resume, retire and their error paths, as ql3_admin."""
    dsn = ql3_db.dsn("admin")
    out = ql3_ok("schedule", "add", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin",
              "--misfire", "skip", "--grace-ms", "5000", "--dsn", dsn)  # fmt: skip
    assert "added schedule 'nightly'" in out
    listed = json.loads(ql3_ok("schedule", "list", "--json", "--dsn", dsn))
    assert [(s["name"], s["state"]) for s in listed] == [("nightly", "active")]
    assert listed[0]["definition"]["timezone"] == "Europe/Berlin"
    assert listed[0]["next_due_at_ms"] > db_now_ms(ql3_db.superuser_dsn)
    assert "nightly" in ql3_ok("schedule", "list", "--dsn", dsn)
    assert "paused" in ql3_ok("schedule", "pause", "nightly", "--dsn", dsn)
    assert "active" in ql3_ok("schedule", "resume", "nightly", "--dsn", dsn)
    assert "ghost" in ql3_fails(1, "schedule", "resume", "ghost", "--dsn", dsn)
    assert "ghost" in ql3_fails(1, "schedule", "retire", "ghost", "--dsn", dsn)
    assert "retired" in ql3_ok("schedule", "retire", "nightly", "--dsn", dsn)
    assert "ghost" in ql3_fails(1, "schedule", "pause", "ghost", "--dsn", dsn)
    ql3_ok("schedule", "add", "dup", "--cron", "* * * * *", "--dsn", dsn)
    assert "dup" in ql3_fails(1, "schedule", "add", "dup", "--cron", "* * * * *", "--dsn", dsn)
    assert "'every day'" in ql3_fails(
        2, "schedule", "add", "x", "--cron", "every day", "--dsn", dsn
    )
    assert "Moon/Base" in ql3_fails(
        2, "schedule", "add", "x", "--cron", "* * * * *", "--tz", "Moon/Base", "--dsn", dsn
    )
    assert "sometimes" in ql3_fails(
        2, "schedule", "add", "x", "--cron", "* * * * *", "--misfire", "sometimes", "--dsn", dsn
    )


def test_schedule_apply_is_idempotent_and_prunes(ql3_db: Ql3Database, tmp_path: Path) -> None:
    """Apply creates, leaves unchanged, updates and (with --prune) retires, from TOML and JSON."""
    dsn = ql3_db.dsn("admin")
    toml = tmp_path / "schedules.toml"
    toml.write_text(
        '[[schedule]]\nname = "a"\ncron = "*/5 * * * *"\n\n'
        '[[schedule]]\nname = "b"\ncron = "0 9 * * 1-5"\ntz = "America/New_York"\n'
        'misfire = "catch_up"\ngrace_ms = 120000\n\n'
        '[[schedule]]\nname = "c"\ncron = "0 0 1 * *"\n'
    )
    assert "created 3, updated 0, unchanged 0, retired 0" in ql3_ok(
        "schedule", "apply", str(toml), "--dsn", dsn
    )
    assert "created 0, updated 0, unchanged 3, retired 0" in ql3_ok(
        "schedule", "apply", str(toml), "--dsn", dsn
    )
    changed = tmp_path / "schedules.json"
    changed.write_text(json.dumps([
        {"name": "a", "cron": "*/10 * * * *"},
        {"name": "b", "cron": "0 9 * * 1-5", "tz": "America/New_York", "misfire": "catch_up",
         "grace_ms": 120000},
    ]))  # fmt: skip
    report = json.loads(
        ql3_ok("schedule", "apply", str(changed), "--prune", "--json", "--dsn", dsn)
    )
    assert report["updated"] == ["a"]
    assert report["unchanged"] == ["b"]
    assert report["retired"] == ["c"]
    states = {
        s["name"]: s["state"]
        for s in json.loads(ql3_ok("schedule", "list", "--json", "--dsn", dsn))
    }
    assert states == {"a": "active", "b": "active", "c": "retired"}


def test_apply_ten_thousand_schedules_in_one_call(ql3_db: Ql3Database, tmp_path: Path) -> None:
    """10 000 schedules apply in one process and one transaction, and all are there."""
    path = tmp_path / "many.json"
    path.write_text(
        json.dumps([{"name": f"job-{i:05d}", "cron": f"{i % 60} * * * *"} for i in range(10_000)])
    )
    out = ql3_ok("schedule", "apply", str(path), "--dsn", ql3_db.dsn("admin"))
    assert "created 10000" in out
    count = sql_rows(ql3_db.superuser_dsn, "SELECT count(*) FROM ql3.trigger_schedules")[0][0]
    assert count == 10_000


def test_preview_from_the_database_clock(ql3_db: Ql3Database) -> None:
    """Without --after, preview starts from the database's time when a DSN is configured."""
    before = db_now_ms(ql3_db.superuser_dsn)
    result = run_ql3(
        "schedule", "preview", "--cron", "* * * * * *", "--count", "3", "--json",
        env=clean_env(QL3_DSN=ql3_db.dsn("admin")),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert len(values) == 3
    assert before < values[0] <= before + 60_000
    assert values[1] - values[0] == 1_000


def test_status_shows_database_time_and_schedules(ql3_db: Ql3Database) -> None:
    """`ql3 status` reports the database time, schedules and claims, as JSON and text."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "hourly", "--cron", "0 * * * *", "--dsn", dsn)
    before = db_now_ms(ql3_db.superuser_dsn)
    status = json.loads(ql3_ok("status", "--json", "--dsn", dsn))
    assert status["database_now_ms"] >= before
    assert [s["name"] for s in status["schedules"]] == ["hourly"]
    assert status["claims_held"] == 0
    text = ql3_ok("status", "--dsn", dsn)
    assert "database time" in text
    assert "hourly" in text


def test_status_shows_overdue_schedules(ql3_db: Ql3Database) -> None:
    """An active cursor more than lease + grace behind the database clock is `overdue`."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "late", "--cron", "* * * * * *", "--dsn", dsn)
    ql3_ok("schedule", "add", "fine", "--cron", "0 * * * *", "--dsn", dsn)
    sql_rows(
        ql3_db.superuser_dsn,
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - 600000"
        " WHERE task_id = (SELECT id FROM ql3.tasks WHERE name = 'late')",
    )
    status = json.loads(ql3_ok("status", "--json", "--dsn", dsn))
    assert {s["name"]: s["overdue"] for s in status["schedules"]} == {"fine": False, "late": True}
    assert (status["schedules_overdue"], status["lease_ms"]) == (1, 30_000)
    text = ql3_ok("status", "--lease-ms", "60000", "--dsn", dsn)
    assert "1 overdue (more than lease 60000 ms + grace)" in text
    assert "active (overdue)" in text
    assert "--lease-ms" in ql3_fails(2, "status", "--lease-ms", "5", "--dsn", dsn)


def test_verify_clean_then_one_line_per_violation(ql3_db: Ql3Database) -> None:
    """`ql3 verify` exits 0 on a clean history and 1 with a line per violation otherwise."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "v", "--cron", "* * * * *", "--dsn", dsn)
    assert ql3_ok("verify", "--dsn", dsn).startswith("ok:")
    assert json.loads(ql3_ok("verify", "--json", "--dsn", dsn))["ok"] is True
    schedule_id = sql_rows(ql3_db.superuser_dsn, "SELECT id, task_id FROM ql3.trigger_schedules")[0]
    # A run without its attempt and events: a broken 1:1:2 shape.
    sql_rows(
        ql3_db.superuser_dsn,
        "INSERT INTO ql3.runs (schedule_id, task_id, scheduled_for_ms, owner_id, claim_token,"
        " created_at_ms) VALUES (%s, %s, 60000, 'forger', gen_random_uuid(), 60000)",
        list(schedule_id),
    )
    result = run_ql3("verify", "--dsn", dsn)
    assert result.returncode == 1
    lines = result.stdout.strip().splitlines()
    assert lines
    assert all("schedule" in line for line in lines)
    # Occurrences before --since-ms are out of scope: the forged run at 60 000 ms is not judged.
    since = str(db_now_ms(ql3_db.superuser_dsn))
    assert ql3_ok("verify", "--since-ms", since, "--dsn", dsn).startswith("ok:")


def test_missing_schedule_file_and_bad_demo_flags_exit_2(tmp_path: Path) -> None:
    """A schedule file that does not exist, or a demo with zero replicas, is a usage error."""
    assert "missing.toml" in ql3_fails(
        2, "schedule", "apply", str(tmp_path / "missing.toml"), "--dsn", "host=203.0.113.1"
    )
    result = run_ql3("demo", "--replicas", "0")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_schema_mismatch_exits_3(ql3_db: Ql3Database) -> None:
    """`ql3 run` against a newer schema exits 3 at start-up with one clear line."""
    sql_rows(
        ql3_db.superuser_dsn,
        "INSERT INTO ql3.schema_migrations (name, version, sha256, applied_at_ms)"
        " VALUES ('9999_future.sql', 9999, repeat('0', 64), 0)",
    )
    line = ql3_fails(3, "run", "--dsn", ql3_db.dsn("runtime"), "--owner-id", "x")
    assert "9999" in line


def test_unreachable_dsn_exits_1_with_one_line() -> None:
    """A DSN nobody answers is one line naming the host and port, exit 1."""
    dsn = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=3"
    line = ql3_fails(1, "status", "--dsn", dsn)
    assert "127.0.0.1" in line
    assert "port 1" in line


def test_config_errors_exit_2_as_real_processes() -> None:
    """QL3_CLOCK, --clock, a stray QL3_* variable and a missing DSN all exit 2 naming the cause."""
    assert "rule zero" in ql3_fails(2, "run", env=clean_env(QL3_CLOCK="node", QL3_DSN="host=x"))
    assert "rule zero" in ql3_fails(2, "run", "--clock", "node", "--dsn", "host=x")
    assert "QL3_FOO" in ql3_fails(2, "run", env=clean_env(QL3_FOO="1", QL3_DSN="host=x"))
    assert "QL3_DSN" in ql3_fails(2, "run")
    assert "'xml'" in ql3_fails(2, "run", "--log-format", "xml")
    assert "--bogus" in ql3_fails(2, "status", "--bogus")


def test_roles_login_sends_only_a_verifier(
    pg_cluster: ThrowawayCluster, ql3_db: Ql3Database
) -> None:
    """`ql3 roles login` makes a working login; the password is in no argument and no log."""
    name = f"app_admin_{uuid.uuid4().hex[:6]}"
    password = f"pw-{uuid.uuid4().hex}"
    result = subprocess.run(
        [*ql3_executable(), "roles", "login", name, "--role", "admin", "--password-stdin"],
        input=f"{password}\n",
        env=clean_env(QL3_DSN=ql3_db.superuser_dsn),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert f"login {name}: member of ql3_admin" in result.stdout
    (stored,) = sql_rows(
        ql3_db.superuser_dsn, "SELECT rolpassword FROM pg_authid WHERE rolname = %s", [name]
    )
    assert stored[0].startswith("SCRAM-SHA-256$")
    with psycopg.connect(pg_cluster.dsn(ql3_db.name, user=name, password=password)) as conn:
        assert conn.execute("SELECT pg_has_role('ql3_admin', 'MEMBER')").fetchone() == (True,)
    assert "--role: " in ql3_fails(2, "roles", "login", name, "--role", "root", "--dsn", "x=1")


def test_verify_reports_a_schedule_nobody_decides_as_stalled(ql3_db: Ql3Database) -> None:
    """No Coordinator for 2 minutes: `stall`; judged as of its creation, the same history is ok."""
    dsn = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "v", "--cron", "* * * * * *", "--dsn", dsn)
    created = db_now_ms(ql3_db.superuser_dsn)
    # As if created 2 minutes ago (cursor, revision and times alike) with nothing decided since.
    sql_rows(
        ql3_db.superuser_dsn,
        "UPDATE ql3.trigger_schedules SET next_due_at_ms = next_due_at_ms - 120000,"
        " created_at_ms = created_at_ms - 120000, updated_at_ms = updated_at_ms - 120000",
    )
    sql_rows(
        ql3_db.superuser_dsn,
        "UPDATE ql3.schedule_revisions SET first_cursor_ms = first_cursor_ms - 120000,"
        " placed_after_ms = placed_after_ms - 120000, created_at_ms = created_at_ms - 120000",
    )
    result = run_ql3("verify", "--dsn", dsn)
    assert result.returncode == 1
    (line,) = result.stdout.strip().splitlines()
    # Lease 30 s (the default) + grace 60 s: everything older than 90 s is overdue.
    assert line.startswith("stall: schedule 1: stalled from ")
    report = json.loads(run_ql3("verify", "--json", "--lease-ms", "1000", "--dsn", dsn).stdout)
    assert [v["rule"] for v in report["violations"]] == ["stall"]
    assert report["lease_ms"] == 1000
    # As of 100 s ago the cursor was about 20 s behind: within lease 30 s + grace 60 s.
    as_of = created - 100_000
    assert ql3_ok("verify", "--as-of", str(as_of), "--dsn", dsn).startswith("ok:")
    iso = datetime.fromtimestamp(as_of / 1000, tz=UTC).isoformat()
    assert ql3_ok("verify", "--as-of", iso, "--dsn", dsn).startswith("ok:")
    assert "no UTC offset" in ql3_fails(2, "verify", "--as-of", "2026-01-01T00:00:00", "--dsn", dsn)
