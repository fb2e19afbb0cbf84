"""Zone rules come only from the pinned tzdata wheel: never node files or node-relative names."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from cron_cases import wheel_zone
from ql3_runtime_core import (
    ClusterScheduleClaim,
    ScheduleDefinition,
    UnknownTimezoneError,
    ZoneRules,
    checked_commit,
    count_occurrences_ms,
    latest_occurrence_ms,
    load_timezone,
    next_occurrence_ms,
    occurrences_after_ms,
    preview_occurrences,
    resolve_cluster_schedule_decision,
    wheel_zone_data,
    wheel_zone_rules,
    zone_rules_version,
)

NEW_YORK = "America/New_York"
# 2026-01-05T00:00:00Z; the next 09:00 in New York is 14:00Z that day (EST, -05:00).
AFTER_MS = int(datetime(2026, 1, 5, tzinfo=UTC).timestamp()) * 1000

_PROBE = """
import json, sys
from datetime import UTC, datetime
from zoneinfo import ZoneInfo
from ql3_runtime_core import load_timezone, next_occurrence_ms
after_ms = int(sys.argv[1])
moment = datetime.fromtimestamp(after_ms / 1000, UTC)
print(json.dumps({
    "node_offset_s": ZoneInfo("America/New_York").utcoffset(moment).total_seconds(),
    "ql3_offset_s": load_timezone("America/New_York").utcoffset(moment).total_seconds(),
    "next_ms": next_occurrence_ms("0 9 * * *", "America/New_York", after_ms),
}))
"""


def _doctored_zone_dir(root: Path) -> Path:
    """Write a zone directory whose `America/New_York` (and `localtime`) is really Asia/Tokyo."""
    tokyo = resources.files("tzdata").joinpath("zoneinfo", "Asia", "Tokyo").read_bytes()
    (root / "America").mkdir(parents=True)
    (root / "America" / "New_York").write_bytes(tokyo)
    (root / "localtime").write_bytes(tokyo)
    return root


def test_doctored_zone_files_change_nothing(tmp_path: Path) -> None:
    """A process whose PYTHONTZPATH/TZDIR say New York is Tokyo decides exactly like a clean one."""
    zones = _doctored_zone_dir(tmp_path / "zoneinfo")
    env = {**os.environ, "PYTHONTZPATH": str(zones), "TZDIR": str(zones), "TZ": "Asia/Tokyo"}
    result = subprocess.run(
        [sys.executable, "-c", _PROBE, str(AFTER_MS)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    probe = json.loads(result.stdout)
    # The doctoring took effect for anything that asks the node's files...
    assert probe["node_offset_s"] == 9 * 3600
    # ...and not for QL3, which decides exactly as this (clean) process and the wheel's rules do.
    assert probe["ql3_offset_s"] == -5 * 3600
    expected = int(datetime(2026, 1, 5, 9, tzinfo=wheel_zone(NEW_YORK)).timestamp()) * 1000
    assert probe["next_ms"] == expected == next_occurrence_ms("0 9 * * *", NEW_YORK, AFTER_MS)


@pytest.mark.parametrize(
    "name",
    [
        "localtime",
        "posixrules",
        "/etc/localtime",
        "/usr/share/zoneinfo/UTC",
        "../../etc/passwd",
        "America/../UTC",
        "America/New_York/",
        "america/new_york",
        "Mars/Olympus",
        "",
        "EST5EDT/x",
        "zones",
        "__init__.py",
        "zoneinfo/UTC",
    ],
)
def test_names_outside_the_wheels_zone_list_are_refused(name: str) -> None:
    """Node-relative names, paths and names missing from tzdata's zone list are refused."""
    with pytest.raises(UnknownTimezoneError) as caught:
        load_timezone(name)
    assert repr(name) in str(caught.value)


def test_localtime_is_refused_by_the_occurrence_functions() -> None:
    """`localtime` (each node's own /etc/localtime) is refused where occurrences are computed."""
    with pytest.raises(UnknownTimezoneError, match="'localtime'"):
        preview_occurrences("0 9 * * *", "localtime", AFTER_MS, 1)


@pytest.mark.parametrize(
    "name", ["UTC", "America/New_York", "US/Eastern", "Asia/Calcutta", "Etc/GMT+5"]
)
def test_zone_list_names_load_with_the_wheels_rules(name: str) -> None:
    """Canonical names and backward links load, with the offsets of the wheel's own file."""
    zone = load_timezone(name)
    assert str(zone) == name
    for month in range(1, 13):
        moment = datetime(2026, month, 15, 12, tzinfo=UTC)
        assert zone.utcoffset(moment) == wheel_zone(name).utcoffset(moment)


def test_zone_rules_version_names_the_tzdata_wheel() -> None:
    """zone_rules_version() is the installed tzdata wheel's version (what the database records)."""
    assert zone_rules_version() == importlib.import_module("tzdata").__version__


def _made_up(version: str = "2000a") -> ZoneRules:
    """Rules where New York is Tokyo (the way a test plays a second tzdata version)."""
    data = wheel_zone_data()
    data[NEW_YORK] = data["Asia/Tokyo"]
    return ZoneRules.from_data(version, data)


def test_every_cron_function_computes_with_the_rules_it_is_given() -> None:
    """With rules= the engine uses those zones; without, this node's wheel."""
    made_up = _made_up()
    tokyo_9 = int(datetime(2026, 1, 5, 0, tzinfo=UTC).timestamp()) * 1000  # 09:00 in Tokyo
    real_9 = int(datetime(2026, 1, 5, 14, tzinfo=UTC).timestamp()) * 1000  # 09:00 EST
    assert next_occurrence_ms("0 9 * * *", NEW_YORK, AFTER_MS - 1, rules=made_up) == tokyo_9
    assert next_occurrence_ms("0 9 * * *", NEW_YORK, AFTER_MS - 1) == real_9
    assert preview_occurrences("0 9 * * *", NEW_YORK, AFTER_MS - 1, 1, rules=made_up) == [tokyo_9]
    assert count_occurrences_ms("0 9 * * *", NEW_YORK, tokyo_9, tokyo_9, rules=made_up) == 1
    assert count_occurrences_ms("0 9 * * *", NEW_YORK, tokyo_9, tokyo_9) == 0
    assert latest_occurrence_ms("0 9 * * *", NEW_YORK, real_9, 0, rules=made_up) == tokyo_9
    assert next(occurrences_after_ms("0 9 * * *", NEW_YORK, AFTER_MS - 1, rules=made_up)) == (
        tokyo_9
    )


def test_rules_of_one_version_name_never_share_cached_answers() -> None:
    """Two rules objects named alike but holding other data answer each by its own data."""
    real_named_alike = ZoneRules.from_data("2000a", wheel_zone_data())
    made_up = _made_up("2000a")
    one = next_occurrence_ms("0 9 * * *", NEW_YORK, AFTER_MS, rules=real_named_alike)
    other = next_occurrence_ms("0 9 * * *", NEW_YORK, AFTER_MS, rules=made_up)
    assert one == next_occurrence_ms("0 9 * * *", NEW_YORK, AFTER_MS)
    assert other == next_occurrence_ms("0 9 * * *", "Asia/Tokyo", AFTER_MS) != one


def test_a_zone_the_rules_lack_is_unknown_naming_the_version() -> None:
    """Rules without a zone refuse it by name and version; the wheel's rules are the default."""
    rules = ZoneRules.from_data("2000a", {"UTC": wheel_zone_data()["UTC"]})
    with pytest.raises(UnknownTimezoneError, match=r"'Europe/Paris' in zone rules tzdata 2000a"):
        next_occurrence_ms("0 9 * * *", "Europe/Paris", 0, rules=rules)
    assert not rules.knows("Europe/Paris")
    assert rules.knows("UTC")
    assert wheel_zone_rules().version == zone_rules_version()


def test_checked_commit_names_the_rules_version_it_was_decided_with() -> None:
    """The ClaimCommit carries the rules' version (the commit is fenced on it)."""
    made_up = _made_up()
    claim = ClusterScheduleClaim(
        schedule_id=1,
        task_id=1,
        version=1,
        owner_id="o",
        claim_token=uuid.uuid4(),
        claim_acquired_at_ms=AFTER_MS,
        claim_expires_at_ms=AFTER_MS + 30_000,
        next_due_at_ms=AFTER_MS - 1_000,
        definition=ScheduleDefinition(cron="* * * * * *", timezone=NEW_YORK),
    )
    decision = resolve_cluster_schedule_decision(claim, 8, rules=made_up)
    assert checked_commit(claim, decision, 8, rules=made_up).zone_rules_version == "2000a"
    assert checked_commit(claim, decision, 8).zone_rules_version == zone_rules_version()
