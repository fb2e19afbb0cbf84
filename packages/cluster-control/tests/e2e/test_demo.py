"""`ql3 demo --json` end to end: private PostgreSQL, replicas, one SIGKILLed, DB verdict."""

from __future__ import annotations

import json

from fix_db import run_ql3


def test_demo_verdict_is_exact() -> None:
    """The demo's JSON verdict shows every expected occurrence once, none early, 1:1:2, exit 0."""
    result = run_ql3(
        "demo", "--json", "--seconds", "6", "--schedules", "3", "--replicas", "3", timeout=240
    )
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["ok"] is True
    assert verdict["killed_replica"] == "replica-1"
    assert verdict["expected"] >= 3 * 3
    assert verdict["admitted"] == verdict["expected"]
    assert verdict["duplicates"] == 0
    assert verdict["early"] == 0
    assert verdict["missing"] == 0
    assert verdict["rows_per_admission"] == "1:1:2"
    assert verdict["claims_at_rest"] == 0
    assert verdict["verify_ok"] is True
    assert verdict["lateness_p50_ms"] is not None
    assert verdict["lateness_p99_ms"] >= verdict["lateness_p50_ms"]
    survivors = {
        name: code for name, code in verdict["replica_exit_codes"].items() if name != "replica-1"
    }
    assert set(survivors.values()) == {0}
