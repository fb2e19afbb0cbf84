"""Real `ql3 run` replicas meeting rows no replica can read, and recorded zone rules they lack.

One bad row never stops the others (DESIGN §8): rows planted by SQL under two running replicas
must be quarantined while every occurrence of the healthy schedules is admitted exactly once.
Zone rules (DESIGN §9): a replica decides with the recorded rules loaded from the database; while
the database does not hold the recorded version's data, it stays up, claims nothing and says so
on /healthz and /metrics, until the data is stored (`ql3 migrate` from a node with that version);
then it claims again without a restart.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from functools import partial
from typing import TYPE_CHECKING

from fix_db import db_now_ms, run_ql3, sql_rows, wait_for
from history import add_schedules, assert_exact_history, expected_occurrences, plant_schedule
from ql3_cluster_postgres import verify_history
from ql3_runtime_core import zone_rules_version

if TYPE_CHECKING:
    from fix_replicas import Replicas
    from ql3_testkit import Ql3Database

SETTLE_MS = 1_500
LEASE = ("--lease-ms", "4000", "--poll-interval-ms", "1000")
BAD_ROWS = {"bad-cron": ("61 * * * *", "UTC"), "bad-zone": ("* * * * * *", "Mars/Olympus")}


def _runs(db: Ql3Database, schedule_ids: list[int]) -> int:
    rows = sql_rows(
        db.superuser_dsn,
        "SELECT count(*) FROM ql3.runs WHERE schedule_id = ANY(%s)",
        [schedule_ids],
    )
    return int(rows[0][0])


def _at_least(db: Ql3Database, schedule_ids: list[int], count: int) -> bool:
    return _runs(db, schedule_ids) >= count


def _quarantined(db: Ql3Database, schedule_ids: list[int]) -> bool:
    rows = sql_rows(
        db.superuser_dsn,
        "SELECT count(*) FROM ql3.trigger_schedules WHERE id = ANY(%s) AND state = 'invalid'",
        [schedule_ids],
    )
    return int(rows[0][0]) == len(schedule_ids)


def test_bad_rows_under_running_replicas_never_stop_the_healthy_ones(
    ql3_db: Ql3Database, replicas: Replicas
) -> None:
    """Two replicas quarantine planted rows and admit every healthy occurrence exactly once."""
    dsn = ql3_db.dsn("runtime")
    replicas.start("r1", dsn, *LEASE)
    replicas.start("r2", dsn, *LEASE)
    replicas.wait_ready("r1", "r2")
    first = add_schedules(ql3_db.dsn("admin"), 5)
    healthy = list(first)
    wait_for(partial(_at_least, ql3_db, healthy, 10), timeout_s=30, what="healthy admissions")
    bad = {
        name: plant_schedule(ql3_db.superuser_dsn, name, cron=cron, timezone=zone)
        for name, (cron, zone) in BAD_ROWS.items()
    }
    wait_for(partial(_quarantined, ql3_db, list(bad.values())), timeout_s=20, what="quarantine")
    # Keep running well past the quarantine: the healthy schedules must go on, on time.
    after = db_now_ms(ql3_db.superuser_dsn) + 4_000
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= after, timeout_s=20, what="time to pass")
    end_ms = db_now_ms(ql3_db.superuser_dsn) - SETTLE_MS
    expected = expected_occurrences(first, end_ms)
    wait_for(lambda: _runs(ql3_db, healthy) >= len(expected), timeout_s=20, what="every occurrence")
    assert all(process.poll() is None for process in replicas.processes.values()), "a replica died"
    codes = replicas.stop_all()
    assert set(codes.values()) == {0}, codes
    assert_exact_history(ql3_db.superuser_dsn, first, end_ms)
    rows = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT t.name, s.state, s.invalid_reason, s.invalidated_at_ms, s.claim_owner_id,"
        " s.claim_token, s.claim_expires_at_ms, (SELECT count(*) FROM ql3.runs r"
        " WHERE r.schedule_id = s.id) FROM ql3.trigger_schedules s"
        " JOIN ql3.tasks t ON t.id = s.task_id WHERE s.id = ANY(%s) ORDER BY t.name",
        [list(bad.values())],
    )
    for name, state, reason, at, owner, token, expires, runs in rows:
        cron, zone = BAD_ROWS[name]
        assert state == "invalid"
        assert (cron if name == "bad-cron" else zone) in reason
        assert at is not None
        assert (owner, token, expires, runs) == (None, None, None, 0)
    quarantines = [
        json.loads(line)
        for name in ("r1", "r2")
        for line in replicas.log(name).splitlines()
        if '"schedule.quarantined"' in line
    ]
    assert sorted(record["schedule_id"] for record in quarantines) == sorted(bad.values())
    assert all(record["level"] == "WARNING" for record in quarantines)
    report = verify_history(ql3_db.dsn("admin"))
    assert sorted((v.rule, v.schedule_id) for v in report.violations) == sorted(
        ("invalid_schedule", schedule_id) for schedule_id in bad.values()
    )


def _metrics_port(replicas: Replicas, name: str) -> int:
    port: list[int] = []

    def serving() -> bool:
        for line in replicas.log(name).splitlines():
            if '"metrics.serving"' in line:
                port.append(int(json.loads(line)["port"]))
                return True
        return False

    wait_for(serving, timeout_s=60, what="metrics server")
    return port[0]


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310  # local test server
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as error:
        return int(error.code), error.read().decode()


def _gauge(base: str, name: str) -> float | None:
    for line in _get(f"{base}/metrics")[1].splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return None


def test_a_replica_without_the_recorded_rules_data_waits_for_it(
    ql3_db: Ql3Database, replicas: Replicas
) -> None:
    """503 naming the version and why, no claim; once its data is stored it claims, no restart."""
    local = zone_rules_version()
    first = add_schedules(ql3_db.dsn("admin"), 2)
    sql_rows(ql3_db.dsn("owner"), "DELETE FROM ql3.zone_rule_data WHERE version = %s", [local])
    replicas.start("no-rules", ql3_db.dsn("runtime"), *LEASE, "--metrics-port", "0")
    base = f"http://127.0.0.1:{_metrics_port(replicas, 'no-rules')}"
    # 503 comes first for "not connected yet"; wait for the zone rules to be the reason.
    wait_for(
        lambda: "no rule data" in _get(f"{base}/healthz")[1],
        timeout_s=20,
        what="/healthz 503 naming the zone rules",
    )
    status, body = _get(f"{base}/healthz")
    assert status == 503
    assert f"the database records tzdata {local}" in body
    assert f"no rule data for tzdata {local}" in body
    wait_for(lambda: _gauge(base, "ql3_zone_rules_mismatch") == 1, timeout_s=20, what="gauge 1")
    # Two seconds of due occurrences, and nothing claimed.
    until = max(first.values()) + 2_000
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= until, timeout_s=20, what="time to pass")
    assert _runs(ql3_db, list(first)) == 0
    claimed = "SELECT count(*) FROM ql3.trigger_schedules WHERE claim_token IS NOT NULL"
    assert sql_rows(ql3_db.superuser_dsn, claimed) == [(0,)]
    assert replicas.logged("no-rules", "zone_rules.mismatch")
    migrated = run_ql3("migrate", "--dsn", ql3_db.dsn("owner"))
    assert migrated.returncode == 0, migrated.stderr
    assert f"stored the rule data of tzdata {local}" in migrated.stdout
    wait_for(lambda: _get(f"{base}/healthz") == (200, "ok\n"), timeout_s=20, what="/healthz 200")
    assert _gauge(base, "ql3_zone_rules_mismatch") == 0
    # The occurrences due while it waited were on time (grace 60 s) and are admitted now.
    end_ms = db_now_ms(ql3_db.superuser_dsn) - SETTLE_MS
    expected = expected_occurrences(first, end_ms)
    wait_for(
        lambda: _runs(ql3_db, list(first)) >= len(expected), timeout_s=20, what="claiming resumes"
    )
    assert replicas.terminate("no-rules") == 0
    assert_exact_history(ql3_db.superuser_dsn, first, end_ms)
    assert replicas.logged("no-rules", "zone_rules.loaded")
    assert verify_history(ql3_db.dsn("admin")).ok
