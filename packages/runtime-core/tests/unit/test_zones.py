"""Zone rules come only from the pinned tzdata wheel: never node files or node-relative names."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from cron_cases import wheel_zone
from ql3_runtime_core import (
    UnknownTimezoneError,
    load_timezone,
    next_occurrence_ms,
    preview_occurrences,
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
