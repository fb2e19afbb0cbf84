"""Real `ql3 run` processes: skewed node clocks, SIGTERM and SIGKILL, metrics and health."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.request
from functools import partial
from typing import TYPE_CHECKING

from fix_db import clean_env, db_now_ms, sql_rows, wait_for
from history import add_schedules, assert_exact_history, expected_occurrences, read_history
from ql3_cluster_postgres import verify_history
from ql3_testkit import Ql3Database, find_faketime_library

if TYPE_CHECKING:
    from fix_replicas import Replicas

SETTLE_MS = 1_500


def _faketime_env(offset: str) -> dict[str, str]:
    return {
        "LD_PRELOAD": str(find_faketime_library()),
        "FAKETIME": offset,
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }


def _node_clock_skew_s(offset: str, db: Ql3Database) -> float:
    """How far a process under `offset` sees the wall clock from the database clock (seconds)."""
    out = subprocess.run(
        ["date", "+%s"], env=clean_env(**_faketime_env(offset)), capture_output=True, text=True,
        check=True,
    )  # fmt: skip
    return int(out.stdout.strip()) - db_now_ms(db.superuser_dsn) / 1000


def _admitted_by(db: Ql3Database, owner: str) -> int:
    rows = sql_rows(db.superuser_dsn, "SELECT count(*) FROM ql3.runs WHERE owner_id = %s", [owner])
    return int(rows[0][0])


def _has_admitted(db: Ql3Database, owner: str, count: int) -> bool:
    return _admitted_by(db, owner) >= count


def _drain_and_check(
    db: Ql3Database,
    first: dict[int, int],
    replicas: Replicas,
    *,
    max_lateness_ms: int | None = None,
) -> None:
    """Judge up to now minus a settle margin once everything due is in, then stop and check."""
    end_ms = db_now_ms(db.superuser_dsn) - SETTLE_MS
    expected = expected_occurrences(first, end_ms)
    wait_for(
        lambda: expected <= set(read_history(db.superuser_dsn, list(first)).keys),
        timeout_s=20,
        what="every occurrence up to the end admitted",
    )
    codes = replicas.stop_all()
    assert set(codes.values()) <= {0}, codes
    history = assert_exact_history(db.superuser_dsn, first, end_ms)
    if max_lateness_ms is not None:
        assert max(row[2] - row[1] for row in history.runs) < max_lateness_ms
    report = verify_history(db.dsn("admin"))
    assert report.ok, report.violations


def test_skewed_node_clocks_admit_exactly_the_normal_history(
    ql3_db: Ql3Database, replicas: Replicas
) -> None:
    """Replicas at +1 h / -1 h node clocks, alone and racing a normal one: each occurrence once."""
    assert abs(_node_clock_skew_s("+1h", ql3_db) - 3600) < 120, "libfaketime +1h had no effect"
    assert abs(_node_clock_skew_s("-1h", ql3_db) + 3600) < 120, "libfaketime -1h had no effect"
    dsn = ql3_db.dsn("runtime")
    lease = ("--lease-ms", "4000", "--poll-interval-ms", "1000")
    # Each phase's replicas are connected before the previous one leaves (SIGTERM releases its
    # claims), so no occurrence waits for a process start-up on a busy host.
    replicas.start("plus1h", dsn, *lease, preload=_faketime_env("+1h"))
    replicas.wait_ready("plus1h")
    first = add_schedules(ql3_db.dsn("admin"), 3)
    # Alone: the +1 h replica does all the work by itself, on time by the database clock.
    wait_for(partial(_has_admitted, ql3_db, "plus1h", 15), timeout_s=30, what="plus1h admits")
    replicas.start("minus1h", dsn, *lease, preload=_faketime_env("-1h"))
    replicas.wait_ready("minus1h")
    assert replicas.terminate("plus1h") == 0
    # Alone: the -1 h replica.
    wait_for(partial(_has_admitted, ql3_db, "minus1h", 15), timeout_s=30, what="minus1h admits")
    replicas.start("normal", dsn, *lease)
    replicas.start("plus1h-b", dsn, *lease, preload=_faketime_env("+1h"))
    replicas.start("minus1h-b", dsn, *lease, preload=_faketime_env("-1h"))
    replicas.wait_ready("normal", "plus1h-b", "minus1h-b")
    assert replicas.terminate("minus1h") == 0
    # Racing: a normal replica against one at +1 h and one at -1 h.
    start = db_now_ms(ql3_db.superuser_dsn)
    wait_for(lambda: db_now_ms(ql3_db.superuser_dsn) >= start + 4_000, timeout_s=20, what="racing")
    # An hour of node skew would show as an hour of lateness; by database time it is prompt.
    _drain_and_check(ql3_db, first, replicas, max_lateness_ms=10_000)
    owners = read_history(ql3_db.superuser_dsn, list(first)).by_owner()
    assert owners["plus1h"] >= 15
    assert owners["minus1h"] >= 15


def _waiting_backend(db: Ql3Database) -> int | None:
    rows = sql_rows(
        db.superuser_dsn,
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'ql3-coordinator' AND wait_event_type = 'Lock'",
    )
    return int(rows[0][0]) if rows else None


def _claim(db: Ql3Database, schedule_id: int) -> tuple[str | None, int | None]:
    rows = sql_rows(
        db.superuser_dsn,
        "SELECT claim_owner_id, claim_expires_at_ms FROM ql3.trigger_schedules WHERE id = %s",
        [schedule_id],
    )
    return rows[0][0], rows[0][1]


def test_sigterm_releases_claims_for_immediate_takeover(
    ql3_db: Ql3Database, replicas: Replicas
) -> None:
    """SIGTERM while holding a 60 s claim releases it; another replica admits at once; exit 0."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    schedule_id = next(iter(first))
    dsn = ql3_db.dsn("runtime")
    slow_retry = clean_env(QL3_RETRY_INITIAL_MS="30000", QL3_RETRY_MAX_MS="30000")
    import psycopg  # noqa: PLC0415  # only this test holds a lock

    with psycopg.connect(ql3_db.superuser_dsn) as locker:
        # Commits insert into runs: with runs locked, the replica claims, then blocks committing.
        locker.execute("LOCK TABLE ql3.runs IN ACCESS EXCLUSIVE MODE")
        replicas.start("leaving", dsn, "--lease-ms", "60000", preload=slow_retry)
        wait_for(lambda: _waiting_backend(ql3_db) is not None, timeout_s=60, what="blocked commit")
        owner, expires = _claim(ql3_db, schedule_id)
        assert owner == "leaving"
        assert expires is not None
        # The commit fails (connection terminated before COMMIT): the claim is still held.
        sql_rows(
            ql3_db.superuser_dsn, "SELECT pg_terminate_backend(%s)", [_waiting_backend(ql3_db)]
        )
        wait_for(lambda: replicas.logged("leaving", "service.fault"), timeout_s=10, what="fault")
        assert _claim(ql3_db, schedule_id)[0] == "leaving"
        assert replicas.terminate("leaving") == 0
        assert _claim(ql3_db, schedule_id) == (None, None)
        assert replicas.logged("leaving", "claims.released")
        locker.rollback()
    replicas.start("taker", dsn, "--lease-ms", "60000")
    wait_for(lambda: _admitted_by(ql3_db, "taker") > 0, timeout_s=60, what="takeover")
    taken_at = sql_rows(
        ql3_db.superuser_dsn, "SELECT min(created_at_ms) FROM ql3.runs WHERE owner_id = 'taker'"
    )[0][0]
    assert taken_at < expires, "takeover waited for the released claim's expiry"
    _drain_and_check(ql3_db, first, replicas)


def test_sigkill_leaves_claims_to_expire_by_database_time(
    ql3_db: Ql3Database, replicas: Replicas
) -> None:
    """A SIGKILLed replica's claim stands until it expires by DB time; only then taken over."""
    first = add_schedules(ql3_db.dsn("admin"), 1)
    schedule_id = next(iter(first))
    dsn = ql3_db.dsn("runtime")
    import psycopg  # noqa: PLC0415  # only these tests hold a lock

    with psycopg.connect(ql3_db.superuser_dsn) as locker:
        locker.execute("LOCK TABLE ql3.runs IN ACCESS EXCLUSIVE MODE")
        replicas.start("crashing", dsn, "--lease-ms", "4000")
        wait_for(lambda: _waiting_backend(ql3_db) is not None, timeout_s=60, what="blocked commit")
        owner, expires = _claim(ql3_db, schedule_id)
        assert owner == "crashing"
        assert expires is not None
        replicas.kill("crashing")
        locker.rollback()
    replicas.start("survivor", dsn, "--lease-ms", "4000")
    wait_for(lambda: _admitted_by(ql3_db, "survivor") > 0, timeout_s=60, what="takeover")
    assert db_now_ms(ql3_db.superuser_dsn) >= expires
    rows = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT min(created_at_ms), count(*) FILTER (WHERE owner_id = 'crashing' AND created_at_ms"
        " >= %s) FROM ql3.runs WHERE owner_id = 'survivor' OR owner_id = 'crashing'",
        [expires - 4_000],
    )
    taken_at, late_crasher_runs = rows[0]
    assert taken_at >= expires, "taken over before the crashed replica's claim expired"
    assert late_crasher_runs == 0
    _drain_and_check(ql3_db, first, replicas)


def test_metrics_and_healthz_served_by_a_running_replica(
    ql3_db: Ql3Database, replicas: Replicas
) -> None:
    """`ql3 run --metrics-port 0` serves /healthz 200 and Prometheus /metrics with counters."""
    add_schedules(ql3_db.dsn("admin"), 1)
    replicas.start("observed", ql3_db.dsn("runtime"), "--metrics-port", "0")
    port: list[int] = []

    def serving() -> bool:
        for line in replicas.log("observed").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("event") == "metrics.serving":
                port.append(int(record["port"]))
                return True
        return False

    wait_for(serving, timeout_s=60, what="metrics server")
    base = f"http://127.0.0.1:{port[0]}"

    def healthy() -> bool:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:  # noqa: S310
                return bool(response.status == 200)
        except urllib.error.HTTPError:
            return False

    wait_for(healthy, timeout_s=20, what="/healthz 200")
    wait_for(lambda: _admitted_by(ql3_db, "observed") > 0, timeout_s=20, what="an admission")

    def metrics_show_admission() -> bool:
        with urllib.request.urlopen(f"{base}/metrics", timeout=2) as response:  # noqa: S310
            text = response.read().decode()
        return "ql3_admissions_total 0.0" not in text and "ql3_admissions_total" in text

    wait_for(metrics_show_admission, timeout_s=10, what="admissions in /metrics")
    with urllib.request.urlopen(f"{base}/metrics", timeout=2) as response:  # noqa: S310
        text = response.read().decode()
    for name in ("ql3_cycles_total", "ql3_cycle_duration_seconds_bucket", "ql3_claims_held"):
        assert name in text
    assert replicas.terminate("observed") == 0
    summaries = [
        json.loads(line)
        for line in replicas.log("observed").splitlines()
        if line.startswith("{") and '"cycle.summary"' in line
    ]
    assert summaries, "no cycle.summary log line"
    busy = [s for s in summaries if s["claims"] > 0]
    assert busy
    assert all(s["first_claim_acquired_at_ms"] <= s["last_claim_acquired_at_ms"] for s in busy)
