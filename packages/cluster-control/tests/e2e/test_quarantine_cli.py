"""`ql3` verbs for quarantined schedules and zone rules, as real processes against PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations
from typing import TYPE_CHECKING

from fix_db import run_ql3, sql_rows
from history import plant_schedule
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    checked_commit,
    resolve_cluster_schedule_decision,
    zone_rules_version,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

BAD_ZONE = "Mars/Olympus"


def _ok(*args: str) -> str:
    result = run_ql3(*args)
    assert result.returncode == 0, result.stderr
    return result.stdout


def _error(code: int, *args: str) -> str:
    result = run_ql3(*args)
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    (line,) = result.stderr.splitlines()
    assert line.startswith("ql3: error: ")
    return line


def _one_claim_round(db: Ql3Database) -> None:
    """Claim what is due (quarantining what cannot be read) and commit the rest, in-process."""
    command = ClaimClusterScheduleCommand(owner_id="cli-test", claim_token=uuid.uuid4())
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        claim_round = repo.claim_round(command, 16)
        commits = [
            checked_commit(claim, resolve_cluster_schedule_decision(claim, 256), 256)
            for claim in claim_round.claims
        ]
        repo.commit_decisions(commits)


def test_zone_rules_show_and_adopt(ql3_db: Ql3Database) -> None:
    """`zone-rules show` compares the recorded and this node's versions; `adopt` switches them."""
    admin, local = ql3_db.dsn("admin"), zone_rules_version()
    assert f"recorded: tzdata {local}" in _ok("zone-rules", "show", "--dsn", admin)
    sql_rows(ql3_db.dsn("owner"), "UPDATE ql3.zone_rules SET version = '1999z'")
    shown = _ok("zone-rules", "show", "--dsn", admin)
    assert "recorded: tzdata 1999z" in shown
    assert f"this node: tzdata {local}" in shown
    assert "DIFFER" in shown
    as_json = json.loads(_ok("zone-rules", "show", "--json", "--dsn", admin))
    assert (as_json["recorded"]["version"], as_json["this_node"], as_json["agree"]) == (
        "1999z",
        local,
        False,
    )
    # The runtime role may read the zone rules but never switch them.
    assert "permission denied" in _error(1, "zone-rules", "adopt", "--dsn", ql3_db.dsn("runtime"))
    assert f"tzdata 1999z -> {local}" in _ok("zone-rules", "adopt", "--dsn", admin)
    assert "nothing changed" in _ok("zone-rules", "adopt", "--dsn", admin)
    assert "agree" in _ok("zone-rules", "show", "--dsn", admin)


def test_migrate_keeps_a_recorded_version_and_says_so(ql3_db: Ql3Database) -> None:
    """`ql3 migrate` never replaces a recorded zone rules version; it names both versions."""
    sql_rows(ql3_db.dsn("owner"), "UPDATE ql3.zone_rules SET version = '1999z'")
    out = _ok("migrate", "--dsn", ql3_db.dsn("owner"))
    assert "database records tzdata 1999z" in out
    assert f"this node has {zone_rules_version()}" in out
    sql_rows(ql3_db.dsn("owner"), "DELETE FROM ql3.zone_rules")
    out = _ok("migrate", "--dsn", ql3_db.dsn("owner"))
    assert f"recorded zone rules tzdata {zone_rules_version()} (this node's)" in out


def test_a_quarantined_schedule_is_shown_verified_and_fixed(
    ql3_db: Ql3Database, tmp_path: Path
) -> None:
    """status, list and verify show the invalid schedule and its reason until apply fixes it."""
    admin = ql3_db.dsn("admin")
    _ok("schedule", "add", "fine", "--cron", "0 0 1 1 *", "--dsn", admin)
    bad = plant_schedule(ql3_db.superuser_dsn, "lost", cron="* * * * *", timezone=BAD_ZONE)
    _one_claim_round(ql3_db)
    status = json.loads(_ok("status", "--json", "--dsn", admin))
    assert status["invalid_schedules"] == 1
    assert status["zone_rules_version"] == zone_rules_version()
    (lost,) = [item for item in status["schedules"] if item["name"] == "lost"]
    assert lost["state"] == "invalid"
    assert BAD_ZONE in lost["invalid_reason"]
    text = _ok("status", "--dsn", admin)
    assert "1 schedule(s) quarantined" in text
    assert BAD_ZONE in text
    listed = {
        item["name"]: item for item in json.loads(_ok("schedule", "list", "--json", "--dsn", admin))
    }
    assert listed["lost"]["definition"] is None
    assert listed["lost"]["timezone"] == BAD_ZONE
    assert BAD_ZONE in listed["lost"]["invalid_reason"]
    assert BAD_ZONE in _ok("schedule", "list", "--dsn", admin)
    verified = run_ql3("verify", "--dsn", admin)
    assert verified.returncode == 1
    assert verified.stdout.splitlines() == [
        line for line in verified.stdout.splitlines() if line.startswith("invalid_schedule: ")
    ]
    assert f"invalid_schedule: schedule {bad}: 'lost' is quarantined" in verified.stdout
    assert "cannot be read" in _error(1, "schedule", "resume", "lost", "--dsn", admin)
    fixed = tmp_path / "fixed.toml"
    fixed.write_text('[[schedule]]\nname = "lost"\ncron = "* * * * *"\ntz = "Europe/Berlin"\n')
    assert "updated 1" in _ok("schedule", "apply", str(fixed), "--dsn", admin)
    status = json.loads(_ok("status", "--json", "--dsn", admin))
    assert status["invalid_schedules"] == 0
    assert _ok("verify", "--dsn", admin).startswith("ok:")
