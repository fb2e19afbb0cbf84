"""Doctored zone files: a replica whose node says New York is Tokyo decides like every other.

Zone rules come only from the pinned `tzdata` wheel (rule zero, DESIGN §9), so a node's own zone
files (`PYTHONTZPATH`, `TZDIR`, `TZ`) cannot change a decision. The scenario writes a zone
directory where `America/New_York` is really `Asia/Tokyo` (14 h apart in December, 13 h in
summer), proves that a plain `zoneinfo.ZoneInfo` in that environment reads the lie, then runs
replicas with it beside a normal one. The schedules fire every second only during the current
and the next New York hour, so a replica deciding with Tokyo's rules would find no occurrence
for half a day and move the cursor past every expected one; the verdict (cronsim over the
unmodified rules) must still be every occurrence exactly once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from importlib import resources
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from harness import SLACK, Bound

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    from harness import Scenario

ZONE = "America/New_York"
LEASE_MS = 2_000
# No zone file decides anything, so the doctored replicas owe exactly the baseline's bound.
BOUND = Bound.of(SLACK)
# Any fixed instant will do to show which rules a process reads (never the node clock).
PROBE = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
TOKYO_OFFSET_S = 9 * 3600


def _doctored_zone_dir(root: Path) -> Path:
    """Write a zone directory whose America/New_York holds Asia/Tokyo's rules."""
    tokyo = resources.files("tzdata").joinpath("zoneinfo", "Asia", "Tokyo").read_bytes()
    target = root / "zoneinfo" / "America" / "New_York"
    target.parent.mkdir(parents=True)
    target.write_bytes(tokyo)
    return root / "zoneinfo"


def _doctored_env(zone_dir: Path) -> dict[str, str]:
    return {"PYTHONTZPATH": str(zone_dir), "TZDIR": str(zone_dir), "TZ": ZONE}


def _offset_seen(env: dict[str, str]) -> int:
    """Return the UTC offset (s) a plain `ZoneInfo(ZONE)` reports at PROBE under `env`."""
    code = (
        "import json, sys, zoneinfo, datetime as d;"
        f"p = d.datetime.fromisoformat({PROBE.isoformat()!r});"
        f"print(json.dumps(p.astimezone(zoneinfo.ZoneInfo({ZONE!r})).utcoffset().total_seconds()))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=dict(os.environ) | env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(json.loads(result.stdout))


def _new_york_hours(now_ms: int) -> str:
    """Return the current and the next New York hour as a cron hour list (real rules)."""
    hour = datetime.fromtimestamp(now_ms / 1000, ZoneInfo(ZONE)).hour
    return f"{hour},{(hour + 1) % 24}"


def test_doctored_zone_files_change_no_decision(scenario: Callable[[str, str], Scenario]) -> None:
    """Replicas told New York is Tokyo admit exactly what the real rules say, like a normal one."""
    run = scenario("doctored-zone-files", "3, 7")
    run.prepare()
    zone_dir = _doctored_zone_dir(run.workdir)
    env = _doctored_env(zone_dir)
    seen = _offset_seen(env)
    assert seen == TOKYO_OFFSET_S, f"the doctored zone files did not take effect: offset {seen} s"
    assert _offset_seen({}) != TOKYO_OFFSET_S
    doctored = [run.replica(lease_ms=LEASE_MS, claim_batch=1, env_extra=env) for _ in range(2)]
    run.replica(lease_ms=LEASE_MS, claim_batch=1)
    run.fault(
        f"2 replicas whose {ZONE} zone file is Asia/Tokyo's (PYTHONTZPATH, TZDIR, TZ), beside a"
        " normal one"
    )
    run.wait_ready()
    cron = f"* * {_new_york_hours(run.now_ms())} * * *"
    run.add_schedules(6, window_s=12, cron=cron, timezone=ZONE)
    run.wait_exhausted(timeout_s=35)
    by_replica = {r.owner_id: r.admitted() for r in run.replicas}
    run.note(
        f"cron {cron!r} in {ZONE}; doctored node offset {seen // 3600} h; admitted per replica: "
        + ", ".join(f"{k}={v}" for k, v in by_replica.items())
    )
    assert sum(r.admitted() for r in doctored) > 0, "the doctored replicas admitted nothing"
    run.finish(bound=BOUND)
