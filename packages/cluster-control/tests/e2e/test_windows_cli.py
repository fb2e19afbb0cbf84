"""Windows and one-off runs from the command line and schedule files, against real PostgreSQL.

The CLI runs in-process (`cli`); everything asserted is read back from the database. One-offs in
a DST gap and fold are driven through real Coordinator cycles on the faketime cluster, its clock
frozen on their instants, so "admitted exactly once, then exhausted" is the history's word.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations
from typing import TYPE_CHECKING, Any

from fix_db import db_now_ms, sql_rows
from ql3_cluster_control import Coordinator
from ql3_cluster_control import cli_app as app
from ql3_cluster_postgres import PostgresScheduleRepository, verify_history
from ql3_runtime_core import load_timezone

if TYPE_CHECKING:
    from ql3_testkit import Ql3Database, ThrowawayCluster
    from typer.testing import CliRunner

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_HOUR = 3_600_000
_DAY = 24 * _HOUR
_BERLIN = "Europe/Berlin"


def _ms(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def _iso(ms: int, offset_h: int = 0) -> str:
    """Epoch ms as ISO 8601 with a fixed offset (a person's `--start-at`)."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone(timedelta(hours=offset_h))).isoformat()


def _ok(cli: CliRunner, *args: str) -> str:
    result = cli.invoke(app, list(args))
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result.stdout


def _refused(cli: CliRunner, *args: str) -> str:
    result = cli.invoke(app, list(args))
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    return result.stderr


def _listed(cli: CliRunner, dsn: str) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in json.loads(_ok(cli, "schedule", "list", "--json", "--dsn", dsn))}


def test_a_window_is_stored_shown_and_one_already_over_is_refused(
    ql3_db: Ql3Database, cli: CliRunner
) -> None:
    """`--start-at`/`--end-at` reach the row, list and status show them; a dead window writes none.

    The cursor starts at the window's start (not at the database's now), an `--end-at` already
    past and an `--at` already past are refused with exit 2 naming the flag, and no task,
    schedule or revision is left behind by them.
    """
    dsn = ql3_db.dsn("admin")
    now = db_now_ms(ql3_db.superuser_dsn)
    start = now - now % _HOUR + 3 * _HOUR  # a whole hour: an occurrence of the cron below
    end = start + 2 * _DAY
    out = _ok(cli, "schedule", "add", "w", "--cron", "0 * * * *", "--tz", _BERLIN,
              "--start-at", _iso(start, 2), "--end-at", _iso(end), "--dsn", dsn)  # fmt: skip
    assert "window" in out
    listed = _listed(cli, dsn)["w"]
    assert (listed["definition"]["start_at_ms"], listed["definition"]["end_at_ms"]) == (start, end)
    assert listed["next_due_at_ms"] == start
    berlin = load_timezone(_BERLIN)
    shown = datetime.fromtimestamp(start / 1000, tz=berlin).isoformat(timespec="milliseconds")
    assert shown in _ok(cli, "schedule", "list", "--dsn", dsn)
    status = json.loads(_ok(cli, "status", "--json", "--dsn", dsn))
    (item,) = status["schedules"]
    assert (item["start_at_ms"], item["end_at_ms"], item["next_due_at_ms"]) == (start, end, start)
    assert "window (UTC)" in _ok(cli, "status", "--dsn", dsn)

    over = _refused(cli, "schedule", "add", "over", "--cron", "* * * * *",
                    "--end-at", _iso(now - _HOUR), "--dsn", dsn)  # fmt: skip
    assert "--end-at:" in over
    assert "nothing written" in over
    wall = datetime.fromtimestamp((now - _DAY) / 1000, tz=UTC).replace(tzinfo=None, microsecond=0)
    past = _refused(cli, "schedule", "add", "once", "--at", wall.isoformat(), "--dsn", dsn)
    assert f"--at: '{wall.isoformat()}' in UTC is" in past
    assert "not after the database time" in past
    counts = sql_rows(
        ql3_db.superuser_dsn,
        "SELECT (SELECT count(*) FROM ql3.tasks), (SELECT count(*) FROM ql3.trigger_schedules),"
        " (SELECT count(*) FROM ql3.schedule_revisions)",
    )
    assert counts == [(1, 1, 1)]


def _revisions(dsn: str, name: str) -> list[tuple[Any, ...]]:
    return sql_rows(
        dsn,
        "SELECT v.reason, v.start_at_ms, v.end_at_ms, v.first_cursor_ms, v.end_cursor_ms"
        " FROM ql3.schedule_revisions AS v JOIN ql3.trigger_schedules AS s"
        " ON s.id = v.schedule_id JOIN ql3.tasks AS t ON t.id = s.task_id"
        " WHERE t.name = %s ORDER BY v.revision",
        [name],
    )


def test_apply_with_windows_reapplies_unchanged_and_a_changed_window_is_a_revision(
    ql3_db: Ql3Database, cli: CliRunner, tmp_path: Path
) -> None:
    """A file's windows and one-off apply once; a new end keeps the cursor, a new start moves it.

    Reapplying the same file (the one-offs' instants recomputed) changes nothing; a one-off
    already past is created exhausted, so reapplying it never fails. Moving the end
    is a 'redefined' revision around the kept cursor; moving the start places the cursor anew
    ('replaced'), as a cron change does; verify accounts for every revision.
    """
    dsn = ql3_db.dsn("admin")
    now = db_now_ms(ql3_db.superuser_dsn)
    start = now - now % _HOUR + 2 * _HOUR
    later = start + 5 * _HOUR
    at = datetime.fromtimestamp((now + 40 * _DAY) / 1000, tz=UTC).replace(tzinfo=None)
    at = at.replace(hour=12, minute=15, second=0, microsecond=0)  # noon: never in a DST change
    gone = datetime.fromtimestamp((now - _DAY) / 1000, tz=UTC).replace(tzinfo=None, microsecond=0)

    def apply(start_ms: int, end_ms: int) -> dict[str, Any]:
        path = tmp_path / "s.toml"
        path.write_text(
            f'[[schedule]]\nname = "w"\ncron = "0 * * * *"\nstart_at = "{_iso(start_ms, -5)}"\n'
            f"end_at = {_iso(end_ms)}\n\n"  # unquoted: a TOML date-time
            f'[[schedule]]\nname = "o"\nat = "{at.isoformat()}"\ntz = "{_BERLIN}"\n\n'
            f'[[schedule]]\nname = "gone"\nat = "{gone.isoformat()}"\n'
        )
        return dict(json.loads(_ok(cli, "schedule", "apply", str(path), "--json", "--dsn", dsn)))

    assert apply(start, start + _DAY)["created"] == ["gone", "o", "w"]
    assert apply(start, start + _DAY)["unchanged"] == ["gone", "o", "w"]
    listed = _listed(cli, dsn)
    # A file's one-off already past is created exhausted (reapplying never fails), runs never.
    assert (listed["gone"]["state"], listed["gone"]["next_due_at_ms"]) == ("exhausted", None)
    instant = _ms(at.replace(tzinfo=load_timezone(_BERLIN)))
    assert listed["o"]["definition"]["start_at_ms"] == listed["o"]["definition"]["end_at_ms"]
    assert listed["o"]["definition"]["start_at_ms"] == instant
    assert listed["o"]["next_due_at_ms"] == instant
    assert apply(start, start + 2 * _DAY)["updated"] == ["w"]
    assert _listed(cli, dsn)["w"]["next_due_at_ms"] == start
    assert apply(later, start + 2 * _DAY)["updated"] == ["w"]
    assert _listed(cli, dsn)["w"]["next_due_at_ms"] == later
    assert _revisions(ql3_db.superuser_dsn, "w") == [
        ("created", start, start + _DAY, start, start),
        ("redefined", start, start + 2 * _DAY, start, start),
        ("replaced", later, start + 2 * _DAY, later, None),
    ]
    assert verify_history(dsn).ok


def _next_gap_and_fold(now_ms: int) -> tuple[datetime, datetime]:
    """Return 02:30 on Berlin's next spring-forward day (a gap) and fall-back day (a fold).

    Found from the database's now, so the test never ages out; `fold=0` vs `fold=1` give
    different offsets exactly on those two days.
    """
    zone = load_timezone(_BERLIN)
    day = datetime.fromtimestamp(now_ms / 1000, tz=UTC).date() + timedelta(days=2)
    found: dict[str, datetime] = {}
    for index in range(800):
        current: date = day + timedelta(days=index)
        wall = datetime(current.year, current.month, current.day, 2, 30)  # noqa: DTZ001
        first, second = wall.replace(tzinfo=zone), wall.replace(tzinfo=zone, fold=1)
        if first.utcoffset() == second.utcoffset():
            continue
        back = first.astimezone(UTC).astimezone(zone).replace(tzinfo=None)
        found.setdefault("gap" if back != wall else "fold", wall)
        if len(found) == 2:
            return found["gap"], found["fold"]
    msg = "no DST change in Europe/Berlin within 800 days"
    raise AssertionError(msg)


def _cycle(db: Ql3Database) -> None:
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        Coordinator(repo, owner_id="one-off-test").run_cycle()


def test_one_offs_in_a_dst_gap_and_fold_are_admitted_once_then_exhausted(
    faketime_db: Ql3Database, faketime_cluster: ThrowawayCluster, cli: CliRunner
) -> None:
    """02:30 in the gap runs at 03:00 (after the gap), in the fold at its first instance, once.

    Real Coordinator cycles decide them with the database clock frozen on each instant and
    later: each one-off has exactly one run, at the instant the cron rules give, none for the
    fold's second 02:30 nor a year later; a one-off missed beyond its grace under `skip` gets one
    skip record and no run. All end `exhausted`, and verify accounts for the whole history.
    """
    dsn = faketime_db.dsn("admin")
    gap, fold = _next_gap_and_fold(db_now_ms(faketime_db.superuser_dsn))
    zone = load_timezone(_BERLIN)
    gap_at = _ms(gap.replace(hour=3, minute=0, tzinfo=zone))  # the first instant after the gap
    fold_at = _ms(fold.replace(tzinfo=zone))  # fold=0: the first instance
    for name, wall, extra in (
        ("gap", gap, []),
        ("fold", fold, []),
        ("late", gap, ["--misfire", "skip", "--grace-ms", "0"]),
    ):
        _ok(cli, "schedule", "add", name, "--at", wall.isoformat(), "--tz", _BERLIN,
            "--command", "true", *extra, "--dsn", dsn)  # fmt: skip
    listed = _listed(cli, dsn)
    assert {name: s["next_due_at_ms"] for name, s in listed.items()} == {
        "gap": gap_at,
        "fold": fold_at,
        "late": gap_at,
    }
    for frozen in (gap_at + 500, gap_at + 2_000, fold_at + 500, fold_at + _HOUR + 500):
        faketime_cluster.freeze_clock_at_ms(frozen)
        _cycle(faketime_db)
    faketime_cluster.freeze_clock_at_ms(fold_at + 400 * _DAY)
    _cycle(faketime_db)
    runs = sql_rows(
        faketime_db.superuser_dsn,
        "SELECT t.name, r.scheduled_for_ms FROM ql3.runs AS r"
        " JOIN ql3.trigger_schedules AS s ON s.id = r.schedule_id"
        " JOIN ql3.tasks AS t ON t.id = s.task_id ORDER BY 1, 2",
    )
    assert runs == [("fold", fold_at), ("gap", gap_at)]
    skips = sql_rows(
        faketime_db.superuser_dsn,
        "SELECT t.name, k.first_skipped_ms, k.last_skipped_ms, k.skipped_count"
        " FROM ql3.skipped_occurrences AS k JOIN ql3.trigger_schedules AS s"
        " ON s.id = k.schedule_id JOIN ql3.tasks AS t ON t.id = s.task_id",
    )
    assert skips == [("late", gap_at, gap_at, 1)]
    listed = _listed(cli, dsn)
    ended = {name: (s["state"], s["next_due_at_ms"]) for name, s in listed.items()}
    assert ended == dict.fromkeys(("gap", "fold", "late"), ("exhausted", None))
    assert "no occurrence left in its window" in _ok(cli, "schedule", "list", "--dsn", dsn)
    report = verify_history(dsn)
    assert report.ok, report.lines()
