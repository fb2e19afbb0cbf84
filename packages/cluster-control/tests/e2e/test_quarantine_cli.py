"""`ql3` verbs for quarantined schedules and zone rules, as real processes against PostgreSQL."""

from __future__ import annotations

import json
import uuid
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations
from typing import TYPE_CHECKING

from fix_db import ql3_ok, run_ql3, sql_rows
from history import plant_schedule
from ql3_cluster_postgres import PostgresScheduleRepository, adopt_zone_rules
from ql3_runtime_core import (
    ClaimClusterScheduleCommand,
    checked_commit,
    resolve_cluster_schedule_decision,
    wheel_zone_data,
    zone_rules_version,
)

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database

BAD_ZONE = "Mars/Olympus"
NEW_YORK = "America/New_York"
MADE_UP = "2000a"


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
        rules = claim_round.rules
        commits = [
            checked_commit(
                claim, resolve_cluster_schedule_decision(claim, 256, rules=rules), 256, rules=rules
            )
            for claim in claim_round.claims
        ]
        repo.commit_decisions(commits)


def test_zone_rules_show_and_adopt(ql3_db: Ql3Database) -> None:
    """`show` gives the recorded version and its history; `adopt --dry-run` lists, `adopt` moves."""
    admin, local = ql3_db.dsn("admin"), zone_rules_version()
    assert f"recorded: tzdata {local}" in ql3_ok("zone-rules", "show", "--dsn", admin)
    # A made-up version where New York is Tokyo, recorded as if adopted from another node.
    made_up = wheel_zone_data()
    made_up[NEW_YORK] = made_up["Asia/Tokyo"]
    adopt_zone_rules(admin, version=MADE_UP, data=made_up)
    shown = ql3_ok("zone-rules", "show", "--dsn", admin)
    assert f"recorded: tzdata {MADE_UP}" in shown
    assert "rule data stored" in shown
    assert f"this node: tzdata {local}" in shown
    assert f"tzdata {local}: in force from" in shown
    assert f"tzdata {MADE_UP}: in force from" in shown
    as_json = json.loads(ql3_ok("zone-rules", "show", "--json", "--dsn", admin))
    assert (as_json["recorded"]["version"], as_json["this_node"]) == (MADE_UP, local)
    assert [entry["version"] for entry in as_json["history"]] == [local, MADE_UP]
    # Placed with the recorded (made-up) rules: 09:00 in "New York" is 09:00 in Tokyo.
    ql3_ok("schedule", "add", "ny", "--cron", "0 9 * * *", "--tz", NEW_YORK, "--dsn", admin)
    preview = json.loads(
        ql3_ok("schedule", "preview", "--cron", "0 9 * * *", "--tz", NEW_YORK, "--after-ms", "1",
            "--count", "1", "--json", "--dsn", admin)
    )  # fmt: skip
    assert preview == [86_400_000]  # 1970-01-02T09:00+09:00; the real New York's is 14:00Z
    dry = ql3_ok("zone-rules", "adopt", "--dry-run", "--dsn", admin)
    assert f"would switch tzdata {MADE_UP} -> {local}" in dry
    assert f"zones whose rules changed: {NEW_YORK}; schedules moved: 1" in dry
    assert f"ny ({NEW_YORK}): next due" in dry
    assert f"recorded: tzdata {MADE_UP}" in ql3_ok("zone-rules", "show", "--dsn", admin)
    # The runtime role may read the zone rules but never switch them.
    assert "permission denied" in _error(1, "zone-rules", "adopt", "--dsn", ql3_db.dsn("runtime"))
    adopted = ql3_ok("zone-rules", "adopt", "--dsn", admin)
    assert f"switched tzdata {MADE_UP} -> {local}" in adopted
    assert f"ny ({NEW_YORK}): next due" in adopted
    assert "nothing changed" in ql3_ok("zone-rules", "adopt", "--dsn", admin)
    assert f"recorded: tzdata {local}" in ql3_ok("zone-rules", "show", "--dsn", admin)
    assert ql3_ok("verify", "--dsn", admin).startswith("ok:")


def test_migrate_keeps_a_recorded_version_and_says_so(ql3_db: Ql3Database) -> None:
    """`ql3 migrate` never replaces a recorded zone rules version; it names both versions."""
    sql_rows(ql3_db.dsn("owner"), "UPDATE ql3.zone_rules SET version = '1999z'")
    out = ql3_ok("migrate", "--dsn", ql3_db.dsn("owner"))
    assert "database records tzdata 1999z but holds no rule data for it" in out
    assert f"this node has {zone_rules_version()}" in out
    assert "ql3 zone-rules adopt" in out
    assert "NO RULE DATA STORED" in ql3_ok("zone-rules", "show", "--dsn", ql3_db.dsn("admin"))
    sql_rows(ql3_db.dsn("owner"), "DELETE FROM ql3.zone_rules")
    out = ql3_ok("migrate", "--dsn", ql3_db.dsn("owner"))
    assert f"recorded zone rules tzdata {zone_rules_version()} (this node's)" in out


def test_a_quarantined_schedule_is_shown_verified_and_fixed(
    ql3_db: Ql3Database, tmp_path: Path
) -> None:
    """status, list and verify show the invalid schedule and its reason until apply fixes it."""
    admin = ql3_db.dsn("admin")
    ql3_ok("schedule", "add", "fine", "--cron", "0 0 1 1 *", "--dsn", admin)
    bad = plant_schedule(ql3_db.superuser_dsn, "lost", cron="* * * * *", timezone=BAD_ZONE)
    _one_claim_round(ql3_db)
    status = json.loads(ql3_ok("status", "--json", "--dsn", admin))
    assert status["invalid_schedules"] == 1
    assert status["zone_rules_version"] == zone_rules_version()
    (lost,) = [item for item in status["schedules"] if item["name"] == "lost"]
    assert lost["state"] == "invalid"
    assert BAD_ZONE in lost["invalid_reason"]
    text = ql3_ok("status", "--dsn", admin)
    assert "1 schedule(s) quarantined" in text
    assert BAD_ZONE in text
    listed = {
        item["name"]: item
        for item in json.loads(ql3_ok("schedule", "list", "--json", "--dsn", admin))
    }
    assert listed["lost"]["definition"] is None
    assert listed["lost"]["timezone"] == BAD_ZONE
    assert BAD_ZONE in listed["lost"]["invalid_reason"]
    assert BAD_ZONE in ql3_ok("schedule", "list", "--dsn", admin)
    verified = run_ql3("verify", "--dsn", admin)
    assert verified.returncode == 1
    assert verified.stdout.splitlines() == [
        line for line in verified.stdout.splitlines() if line.startswith("invalid_schedule: ")
    ]
    assert f"invalid_schedule: schedule {bad}: 'lost' is quarantined" in verified.stdout
    assert "cannot be read" in _error(1, "schedule", "resume", "lost", "--dsn", admin)
    fixed = tmp_path / "fixed.toml"
    fixed.write_text('[[schedule]]\nname = "lost"\ncron = "* * * * *"\ntz = "Europe/Berlin"\n')
    assert "updated 1" in ql3_ok("schedule", "apply", str(fixed), "--dsn", admin)
    status = json.loads(ql3_ok("status", "--json", "--dsn", admin))
    assert status["invalid_schedules"] == 0
    assert ql3_ok("verify", "--dsn", admin).startswith("ok:")
