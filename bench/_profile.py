"""Profile: where one replica's time goes while it drains a burst, and what its statements cost.

Measured before changing anything for speed, and kept, so the next change starts from the same
evidence. S schedules `* * * * *` (`catch_up`; 20 000, `--quick` 5 000) are cloned from a
template and every cursor is set to the next minute boundary of the database clock (as in the
burst part); one `ql3 run` replica (R = 1, default settings) on the durable cluster idles until
it. A second before the boundary `py-spy record --format raw --nonblocking` attaches to the
replica (200 samples/s; idle samples left out, so each share is of the time the replica's Python
was running, not waiting for the server), and it is stopped once all S occurrences are
admitted. Where py-spy is missing or cannot attach (no ptrace permission), the replica runs
under `python -m cProfile` instead and the shares come from its own-time and cumulative
totals. Frames are folded by function (file and name, line numbers dropped); each entry's
share is self (its own samples) and cumulative (samples with it anywhere on the stack).

Then `_profile_plans` runs EXPLAIN (ANALYZE, BUFFERS) of the claim and the commit statements at
the same size (see there). The JSON lines: one `profile` record (shares, drain, CPU per
admission, plans), and one `profile_entry` line per top entry.
"""

from __future__ import annotations

import pstats
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._common import DEFAULTS_LABEL, db_now_ms, wait_until
from ._meters import CpuMeter, login_user
from ._profile_plans import statement_plans
from ._replicas import ReplicaSet, ql3_executable
from ._sql import connect, load_sql

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["fold_pstats", "fold_raw", "run_profile"]

CRON = "* * * * *"
PERIOD_MS = 60_000
LEAD_S = 8.0  # the replica starts and settles before the boundary
DEADLINE_S = 55.0  # the next minute's occurrences fall due at +60 s
RATE_HZ = 200
TOP = 20


def _params(quick: bool) -> dict[str, Any]:  # noqa: FBT001 - a mode switch, not a flag argument
    return {"schedules": 5_000 if quick else 20_000}


def _py_spy() -> str | None:
    """Find py-spy (the `bench` dependency group installs it next to this interpreter)."""
    return shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")


def _frame_name(frame: str) -> str:
    """Fold one py-spy frame, `func (path/to/file.py:123)`, to `func (pkg/file.py)`."""
    name, _, where = frame.partition(" (")
    path = where.rstrip(")").rsplit(":", 1)[0]
    for marker in ("site-packages/", "/src/", "/lib/python"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = Path(path).name or path
    return f"{name} ({path})"


def fold_raw(lines: Iterable[str]) -> tuple[int, Counter[str], Counter[str]]:
    """Fold py-spy's raw output (`frame;frame;... count` per line): total, self and cumulative."""
    total = 0
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    for line in lines:
        stack, _, count_text = line.strip().rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [_frame_name(frame) for frame in stack.split(";")]
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            cumulative[frame] += count
    return total, own, cumulative


def fold_pstats(path: Path) -> tuple[int, Counter[str], Counter[str]]:
    """Fold a cProfile dump the same way, in microseconds: own time and cumulative time."""
    stats: Mapping[tuple[str, int, str], tuple[int, int, float, float, Any]]
    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]  # documented dump
    own: Counter[str] = Counter()
    cumulative: Counter[str] = Counter()
    for (file, _line, func), (_cc, _nc, tt, ct, _callers) in stats.items():
        frame = _frame_name(f"{func} ({file}:0)")
        own[frame] += round(tt * 1e6)
        cumulative[frame] = max(cumulative[frame], round(ct * 1e6))
    return sum(own.values()), own, cumulative


def _top(counter: Counter[str], total: int) -> list[dict[str, Any]]:
    return [
        {"frame": frame, "share": round(count / total, 4) if total else None}
        for frame, count in counter.most_common(TOP)
    ]


def _next_boundary(now_ms: int) -> int:
    boundary = (now_ms // PERIOD_MS + 1) * PERIOD_MS
    return boundary if boundary - now_ms >= LEAD_S * 1000 else boundary + PERIOD_MS


def _replica(ctx: BenchContext, db: Ql3Database, cprofile_to: Path | None) -> ReplicaSet:
    log_dir = ctx.work_dir / db.name
    log_dir.mkdir(parents=True, exist_ok=True)
    command = [ql3_executable(), "run", "--dsn", db.dsn("runtime"), "--log-format", "json"]
    command += ["--owner-id", "profile-r1"]
    if cprofile_to is not None:
        command = [sys.executable, "-m", "cProfile", "-o", str(cprofile_to), *command]
    return ReplicaSet(commands={"profile-r1": command}, log_dir=log_dir)


def _stop_py_spy(spy: subprocess.Popen[bytes]) -> int | None:
    """Stop py-spy like Control-C (it then writes what it sampled) and wait for it."""
    if spy.poll() is None:
        spy.send_signal(signal.SIGINT)
    try:
        return spy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        spy.kill()
        return spy.wait()


def _profiled_burst(
    ctx: BenchContext, template: Ql3Database, size: int, spy_exe: str | None
) -> dict[str, Any]:
    """Drain one burst with one replica under the profiler; return what it measured."""
    db = ctx.database("profile", template=template.name)
    out = ctx.work_dir / f"{db.name}.{'raw' if spy_exe else 'prof'}"
    spy_log = ctx.work_dir / f"{db.name}.py-spy.log"
    user = login_user(db.dsn("runtime"))
    spy: subprocess.Popen[bytes] | None = None
    try:
        with connect(db.superuser_dsn) as su:
            at_ms = _next_boundary(db_now_ms(su))
            su.execute(load_sql("set_cursor_at"), {"at_ms": at_ms})
            su.execute(load_sql("analyze"))
            with _replica(ctx, db, None if spy_exe else out) as replica:
                time.sleep(max(0.0, (at_ms - db_now_ms(su)) / 1000 - 1.0))
                if not replica.alive():
                    msg = f"profiled replica died early:\n{replica.tail('profile-r1')}"
                    raise RuntimeError(msg)
                if spy_exe is not None:
                    command = [spy_exe, "record", "--format", "raw", "--nonblocking"]
                    command += ["--rate", str(RATE_HZ), "-o", str(out)]
                    command += ["--pid", str(replica.pids[0])]
                    with spy_log.open("wb") as sink:
                        spy = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
                meter = CpuMeter(su, user, replica.pids)
                meter.start()

                def drained() -> bool:
                    row = su.execute(load_sql("burst_admitted"), {"at_ms": at_ms}).fetchone()
                    return bool(row and row["runs"] >= size) or not replica.alive()

                time.sleep(max(0.0, (at_ms - db_now_ms(su)) / 1000))
                done = wait_until(drained, timeout_s=DEADLINE_S, interval_s=0.1)
                cpu = meter.stop(size)
                spy_code = _stop_py_spy(spy) if spy is not None else None
                replica.stop()
            verdict = dict(su.execute(load_sql("burst_verdict"), {"at_ms": at_ms}).fetchone() or {})
            ctx.refresh_machine(su)
    finally:
        if spy is not None and spy.poll() is None:
            spy.kill()
        ctx.drop(db)
    if spy_exe is not None:
        if not out.is_file():
            detail = spy_log.read_text(errors="replace") if spy_log.is_file() else ""
            return {"failed": f"py-spy exited {spy_code} without output: {detail[-400:]}"}
        total, own, cumulative = fold_raw(out.read_text(encoding="utf-8").splitlines())
    else:
        total, own, cumulative = fold_pstats(out)
    admitted = int(verdict.get("admitted") or 0)
    for side in ("worker", "backend"):
        seconds = float(cpu.get(f"{side}_cpu_s") or 0)
        cpu[f"{side}_cpu_ms_per_admission"] = (
            round(seconds * 1000 / admitted, 4) if admitted else None
        )
    drain_ms = verdict.get("drain_ms")
    return {
        "profiler": f"py-spy {RATE_HZ} Hz, idle excluded" if spy_exe else "cProfile",
        "samples": total,
        "drained": done,
        "admitted": admitted,
        "missing": int(verdict.get("missing") or 0),
        "duplicates": int(verdict.get("duplicates") or 0),
        "drain_s": round(drain_ms / 1000, 2) if drain_ms is not None else None,
        "rate_per_s": round(admitted * 1000 / drain_ms, 1) if drain_ms else None,
        **cpu,
        "top_self": _top(own, total),
        "top_cumulative": _top(cumulative, total),
    }


def run_profile(ctx: BenchContext) -> list[dict[str, Any]]:
    """Profile one replica draining a burst; EXPLAIN its claim and commit; emit the lines."""
    size = _params(ctx.quick)["schedules"]
    template = ctx.shared_schedules("profile", CRON, size)
    spy_exe = _py_spy()
    measured = _profiled_burst(ctx, template, size, spy_exe)
    if "failed" in measured:
        print(f"# profile: {measured['failed']}; again under cProfile", file=sys.stderr)
        measured = _profiled_burst(ctx, template, size, None)
    plans = statement_plans(ctx, template)
    record = ctx.emit(
        "profile",
        {
            "schedules": size,
            "replicas": 1,
            "cron": CRON,
            "settings": DEFAULTS_LABEL,
            **measured,
            "plans": plans,
        },
    )
    lines = [record]
    for kind in ("self", "cumulative"):
        for rank, entry in enumerate(measured.get(f"top_{kind}", []), start=1):
            entry_line = {"kind": kind, "rank": rank, **entry}
            lines.append(ctx.emit("profile_entry", entry_line))
    return lines
