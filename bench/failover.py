"""Time from a promoted standby accepting writes to the first admission after it (DESIGN §13).

    uv run --group bench python -m bench.failover --rounds 10         # writes docs/RECOVERY.md
    uv run --group bench python -m bench.failover --rounds 2 --quick  # smoke, report to stdout

Each round starts its own primary and a synchronous streaming standby (ql3_testkit), `ql3 run`
replicas on a multi-host DSN (`host=primary,standby target_session_attrs=read-write`) and five
per-second schedules. Once admissions flow it reads the old primary's clock, SIGKILLs its
postmaster, waits `--outage-s` (occurrences fall due meanwhile), runs `pg_ctl promote` without
waiting, and tries a write on the standby every 5 ms, each in a new session. The first write
that succeeds stamps the new leader's database time. Figures, all in database time (rule zero):

- accepting writes: that stamp, or the first session a replica opened on the new primary
  (`backend_start`, `application_name` `ql3-<owner>`, connected with `read-write`) if earlier;
- first admission: the first `runs.created_at_ms` after the kill, minus accepting writes;
- reconnected: each replica's first session on the new primary, minus accepting writes. With
  several replicas one may claim every due schedule, so only the first admission is a
  cluster-wide figure.

The standby is synchronous, the configuration QL3 asks for: with an asynchronous one a claim can
reach the standby without its commit, and the round then measures that claim's lease. Policies:
`fast` (defaults: a short fixed retry while a server answers read-only) and `backoff`
(`QL3_RETRY_FAST_WINDOW_MS=0`: exponential backoff for every fault, as before the fast retry).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psycopg
from ql3_cluster_postgres import ScheduleAdmin
from ql3_runtime_core import ScheduleDefinition
from ql3_testkit import ThrowawayCluster, prepare_ql3_database

from ._common import db_now_ms, repo_root
from ._replicas import ReplicaSet, new_work_dir, ql3_executable
from ._sql import connect, load_sql

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_testkit import Ql3Database

_POLICIES = {"fast": {}, "backoff": {"QL3_RETRY_FAST_WINDOW_MS": "0"}}
_SCHEDULES = 5
_PROBE_INTERVAL_S = 0.005
_TIMEOUT_S = 60.0


def _wait(predicate: Any, what: str) -> None:  # noqa: ANN401 - any zero-argument callable
    deadline = time.monotonic() + _TIMEOUT_S
    while not predicate():
        if time.monotonic() > deadline:
            msg = f"timed out waiting for {what}"
            raise SystemExit(msg)
        time.sleep(0.02)


def _runs(dsn: str) -> int:
    with connect(dsn) as conn:
        row = conn.execute(load_sql("failover_first_admission"), {"since_ms": 0}).fetchall()
    return len(row)


def _first_write_ms(dsn: str) -> int:
    """Poll the promoted node with a write, in a new session each time, until one succeeds.

    A new session each try, as a client reconnecting sees the node (an old session of a standby
    was seen to keep refusing writes for tens of ms after new sessions were accepted).
    """
    deadline = time.monotonic() + _TIMEOUT_S
    while True:
        try:
            with connect(dsn) as conn:
                row = conn.execute(load_sql("failover_probe_write")).fetchone()
        except (psycopg.errors.ReadOnlySqlTransaction, psycopg.OperationalError):
            if time.monotonic() > deadline:
                raise
            time.sleep(_PROBE_INTERVAL_S)
            continue
        assert row is not None  # noqa: S101 - INSERT ... RETURNING of one row
        return int(row["written_at_ms"])


def _now_ms(dsn: str) -> int:
    with connect(dsn) as conn:
        return db_now_ms(conn)


def _first_admissions(dsn: str, since_ms: int) -> dict[str, int]:
    found: dict[str, int] = {}

    def admitted() -> bool:
        with connect(dsn) as conn:
            rows = conn.execute(load_sql("failover_first_admission"), {"since_ms": since_ms})
            found.update({row["owner_id"]: int(row["first_ms"]) for row in rows})
        return bool(found)

    _wait(admitted, "an admission on the new primary")
    return found


def _reconnected(dsn: str, owners: Sequence[str]) -> dict[str, int]:
    names = [f"ql3-{owner}" for owner in owners]
    found: dict[str, int] = {}

    def all_connected() -> bool:
        with connect(dsn) as conn:
            rows = conn.execute(load_sql("failover_reconnected"), {"names": names})
            found.update({row["application_name"]: int(row["connected_ms"]) for row in rows})
        return set(names) <= set(found)

    _wait(all_connected, "every replica connected to the new primary")
    return found


def _prepare(primary: ThrowawayCluster) -> Ql3Database:
    db = prepare_ql3_database(primary, "failover")
    with connect(primary.dsn(db.name)) as conn:
        conn.execute(load_sql("failover_probe_create"))
    with ScheduleAdmin(db.dsn("admin")) as admin:
        for index in range(_SCHEDULES):
            admin.add_schedule(f"every-second-{index}", ScheduleDefinition(cron="* * * * * *"))
    return db


def run_round(policy: str, replicas: int, outage_s: float, log_dir: Path) -> dict[str, Any]:
    """Run one failover round; return the recovery figures in database milliseconds."""
    with ThrowawayCluster(durable=False, name="ql3fo") as primary:
        db = _prepare(primary)
        standby = primary.create_standby(synchronous=True)
        dsn = db.dsn(
            "runtime",
            host="127.0.0.1,127.0.0.1",
            port=f"{primary.port},{standby.port}",
            target_session_attrs="read-write",
        )
        owners = [f"r{index + 1}" for index in range(replicas)]
        exe = ql3_executable()
        group = ReplicaSet(
            commands={
                owner: [exe, "run", "--dsn", f"{dsn} application_name=ql3-{owner}",
                        "--owner-id", owner, "--log-format", "json", "--lease-ms", "2000"]
                for owner in owners
            },
            log_dir=log_dir,
            env=_POLICIES[policy],
        )  # fmt: skip
        with group:
            _wait(lambda: _runs(primary.dsn(db.name)) >= 1, "admissions on the primary")
            killed_at = _now_ms(primary.dsn(db.name))
            primary.kill()
            time.sleep(outage_s)  # the outage: monotonic, occurrences fall due meanwhile
            standby.run_tool("pg_ctl", "promote", "-W", "-D", str(standby.data_dir))
            new_primary = standby.dsn(db.name)
            first_write = _first_write_ms(new_primary)
            # Every admission after the kill is the new primary's: a replica may beat the probe.
            first = min(_first_admissions(new_primary, killed_at).values())
            reconnected = _reconnected(new_primary, owners)
    # A replica's session may start before the probe's write lands (the probe retries every
    # 5 ms and each try opens a session): the node accepted writes by then, so the earlier of
    # the two is the reference. That errs towards a longer recovery, never a shorter one.
    accepted = min(first_write, *reconnected.values())
    return {
        "policy": policy,
        "replicas": replicas,
        "first_write_ms": first_write,
        "accepting_writes_ms": accepted,
        "first_admission_ms": first - accepted,
        "reconnect_ms": sorted(at - accepted for at in reconnected.values()),
    }


def _percentile(values: Sequence[int], fraction: float) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def render(rounds: Sequence[dict[str, Any]], outage_s: float) -> str:
    """Render docs/RECOVERY.md from the rounds' figures."""
    lines = [
        "# Recovery after a failover",
        "",
        (
            "Generated by `uv run --group bench python -m bench.failover` (see its docstring for"
            " the method). Each round: primary + synchronous streaming standby (ql3_testkit),"
            " `ql3 run` replicas on `host=primary,standby target_session_attrs=read-write`,"
            f" SIGKILL of the primary's postmaster, {outage_s} s outage, `pg_ctl promote`."
            " Figures: first admission (`runs.created_at_ms`) and each replica's first session"
            " (`backend_start`) minus the moment the new primary accepted writes (its first"
            " accepted probe write, or a replica's read-write session if earlier), all in the"
            " new primary's database time. Target: p99 <= 500 ms."
        ),
        "",
        (
            "| policy | replicas | rounds | first admission p50 ms | p99 ms | max ms |"
            " replica reconnected p50 / p99 / max ms |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for item in rounds:
        groups.setdefault((item["policy"], item["replicas"]), []).append(item)
    for (policy, replicas), items in groups.items():
        firsts = [item["first_admission_ms"] for item in items]
        each = [ms for item in items for ms in item["reconnect_ms"]]
        lines.append(
            f"| {policy} | {replicas} | {len(items)} | {statistics.median(firsts):.0f} |"
            f" {_percentile(firsts, 0.99)} | {max(firsts)} | {statistics.median(each):.0f} /"
            f" {_percentile(each, 0.99)} / {max(each)} |"
        )
    lines += [
        "",
        (
            "`fast` is the default policy (`QL3_RETRY_FAST_MS=100`: a fixed, jittered 50-100 ms"
            " retry while a host answers read-only); `backoff` sets `QL3_RETRY_FAST_WINDOW_MS=0`,"
            " the exponential backoff of every fault used before the fast retry existed."
        ),
        "",
        "Rounds (JSON): " + json.dumps(list(rounds)),
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rounds, print the figures, write docs/RECOVERY.md unless `--quick`."""
    parser = argparse.ArgumentParser(prog="python -m bench.failover")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--outage-s", type=float, default=1.5)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--render", type=Path, help="re-render from a file of JSON lines")
    args = parser.parse_args(argv)
    rounds: list[dict[str, Any]] = []
    if args.render:
        lines = args.render.read_text(encoding="utf-8").splitlines()
        rounds = [json.loads(line) for line in lines if line.startswith("{")]
    else:
        log_dir = new_work_dir()
        for policy, replicas in (("fast", 1), ("backoff", 1), ("fast", 2)):
            for _ in range(args.rounds):
                result = run_round(policy, replicas, args.outage_s, log_dir)
                print(json.dumps(result), file=sys.stderr, flush=True)
                rounds.append(result)
    report = render(rounds, args.outage_s)
    if args.quick:
        sys.stdout.write(report)
    else:
        (repo_root() / "docs" / "RECOVERY.md").write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
