"""An oracle for QL3 histories that shares no code with the product it judges.

`ql3 verify` (`verify_history`) and the Coordinator share the cron engine and the decision code;
a checker built on them agrees with any bug they share. This one is written from the documented
rules alone (DESIGN §5, §7, §14): its own SQL (`sql/oracle_*.sql`, rows read by column name), its
own occurrences (cronsim in the zone rules the database recorded, `_oracle_cron`), its own
accounting (`_oracle_rules`). The import audit refuses any import of `ql3_runtime_core` or
`ql3_cluster_postgres` here, so it cannot drift into sharing.

It checks, in one REPEATABLE READ snapshot, read-only: every occurrence of every revision's span
is exactly one Run or inside exactly one skip record; no Run early (admitted before its
occurrence by the database clock) or after the clock; no Run that is not an occurrence; the
admission shape of every Run (1 first attempt, 1 `run.admitted`, 1 `attempt.queued` per attempt,
all at the commit's time); no attempt or event without its Run; no claim left at rest past the
grace; quarantined schedules reported (they admit nothing).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from ._oracle_cron import OracleError, Walker, zone_from_tzif
from ._oracle_rules import Finding, Span, judge_schedule, spans_of, unreadable
from ._sql import statement

if TYPE_CHECKING:
    from datetime import tzinfo

__all__ = ["OracleError", "OracleFinding", "OracleVerdict", "oracle_verdict"]

OracleFinding = Finding


@dataclass(frozen=True)
class OracleVerdict:
    """What the oracle found in one snapshot; `ok` when it found nothing."""

    findings: tuple[Finding, ...]
    checked_at_ms: int
    schedules: int
    runs: int
    occurrences: int  # occurrences every span had to account for

    @property
    def ok(self) -> bool:
        """True when no rule is broken."""
        return not self.findings

    def kinds(self) -> Counter[str]:
        """How many findings of each kind."""
        return Counter(finding.kind for finding in self.findings)

    def flagged(self) -> set[tuple[str, int | None]]:
        """Every (kind, schedule) with a finding."""
        return {(finding.kind, finding.schedule_id) for finding in self.findings}

    def lines(self) -> list[str]:
        """One line per finding."""
        return [finding.line() for finding in self.findings]


def oracle_verdict(
    dsn: str,
    *,
    since_ms: int | None = None,
    stale_claim_grace_ms: int = 5_000,
    due_before_ms: int | None = None,
) -> OracleVerdict:
    """Judge the history at `dsn` (any login that reads `ql3`) from the documented rules.

    `since_ms` leaves out occurrences before it; a claim expired longer than
    `stale_claim_grace_ms` ago is a claim left at rest. With `due_before_ms` (a database time,
    such as now - lease - grace), every occurrence of an active schedule due before it must be
    decided too: one still past its cursor is a `stall` (nobody decided it in time).
    """
    params = {"since_ms": since_ms}
    with psycopg.connect(dsn, autocommit=False) as conn:
        conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
        conn.read_only = True
        with conn.cursor(row_factory=dict_row) as cur:
            now_row = cur.execute(statement("oracle_now")).fetchone()
            schedules = cur.execute(statement("oracle_schedules")).fetchall()
            revisions = cur.execute(statement("oracle_revisions")).fetchall()
            runs = cur.execute(statement("oracle_runs"), params).fetchall()
            skips = cur.execute(statement("oracle_skips"), params).fetchall()
            orphans = cur.execute(statement("oracle_orphans")).fetchall()
            backfilled = cur.execute(statement("oracle_backfill_runs"), params).fetchall()
            pruned = cur.execute(statement("oracle_checkpoints")).fetchall()
            zones = _Zones(cur)
            judged = _judge(
                schedules,
                revisions,
                runs,
                skips,
                zones,
                checkpoints={row["schedule_id"]: row for row in pruned},
                now_ms=int(now_row["now_ms"]) if now_row else 0,
                since_ms=since_ms,
                grace_ms=stale_claim_grace_ms,
                due_before_ms=due_before_ms,
            )
        conn.rollback()
    findings, occurrences = judged
    findings += [
        Finding("shape", None, f"{row['kind']} {row['id']} points at missing run {row['run_id']}")
        for row in orphans
    ]
    findings += [
        Finding(
            "backfill",
            row["schedule_id"],
            f"backfilled run {row['id']} at {row['scheduled_for_ms']} {row['problem']}",
        )
        for row in backfilled
    ]
    return OracleVerdict(
        findings=tuple(findings),
        checked_at_ms=int(now_row["now_ms"]) if now_row else 0,
        schedules=len(schedules),
        runs=len(runs),
        occurrences=occurrences,
    )


class _Zones:
    """Zones built from the stored TZif bytes, one per (version, zone), read in the snapshot."""

    def __init__(self, cur: psycopg.Cursor[dict[str, Any]]) -> None:
        self.cur = cur
        self.cache: dict[tuple[str | None, str], tzinfo] = {}
        recorded = cur.execute(statement("oracle_recorded_zone_rules")).fetchone()
        self.recorded: str | None = None if recorded is None else recorded["version"]

    def zone(self, version: str | None, name: str) -> tzinfo:
        """Return the zone `name` under `version` (None: the version recorded now)."""
        version = version if version is not None else self.recorded
        key = (version, name)
        if key not in self.cache:
            row = self.cur.execute(
                statement("oracle_zone_data"), {"version": version, "zone": name}
            ).fetchone()
            try:
                self.cache[key] = zone_from_tzif(name, None if row is None else bytes(row["tzif"]))
            except OracleError as exc:
                msg = f"{exc} under zone rules version {version!r}"
                raise OracleError(msg) from None
        return self.cache[key]

    def walker(self, rev: dict[str, Any]) -> Walker:
        """Return the occurrences of a revision (or a schedule row: the recorded version)."""
        return Walker(rev["cron"], self.zone(rev["zone_rules_version"], rev["timezone"]))


def _judge(  # every row of one snapshot
    schedules: list[dict[str, Any]],
    revisions: list[dict[str, Any]],
    runs: list[dict[str, Any]],
    skips: list[dict[str, Any]],
    zones: _Zones,
    *,
    checkpoints: dict[int, dict[str, Any]],
    now_ms: int,
    since_ms: int | None,
    grace_ms: int,
    due_before_ms: int | None,
) -> tuple[list[Finding], int]:
    by_id = {s["id"]: s for s in schedules}
    runs_of, revisions_of, skips_of = _group(runs), _group(revisions), _group(skips)
    out: list[Finding] = []
    occurrences = 0
    for rows, what in ((runs, "runs"), (revisions, "revisions"), (skips, "skip records")):
        for sid in sorted({row["schedule_id"] for row in rows} - set(by_id)):
            kind = "skip_record" if what == "skip records" else "shape"
            out.append(Finding(kind, sid, f"{what} belong to no schedule"))
    for schedule in schedules:
        sid = schedule["id"]
        own_runs = runs_of.get(sid, [])
        if schedule["state"] == "invalid":
            out.append(Finding("invalid_schedule", sid, "quarantined: it admits nothing"))
            continue
        out += _claim(schedule, now_ms, grace_ms)
        out += [f for run in own_runs for f in _shape(sid, run, schedule)]
        own_revisions = revisions_of.get(sid, [])
        try:
            if schedule["state"] in {"active", "paused"}:  # replicas will read its definition
                zones.walker({**schedule, "zone_rules_version": None})
            spans = spans_of(schedule, own_revisions, zones.walker)
        except OracleError as exc:
            if schedule["state"] in {"active", "paused"}:
                out.append(Finding("invalid_schedule", sid, unreadable(schedule["cron"], exc)))
            continue
        if not own_revisions:
            out.append(Finding("revision", sid, "has no revision: nothing can be accounted for"))
            continue
        # Pruned below the latest boundary: the checkpoints account for what came before.
        proven, floor = _checkpoints(schedule, spans, own_revisions, checkpoints.get(sid), since_ms)
        out += proven
        found, accounted = judge_schedule(
            schedule,
            spans,
            own_runs,
            skips_of.get(sid, []),
            since_ms=floor,
            now_ms=now_ms,
        )
        out += found
        if due_before_ms is not None and schedule["state"] == "active":
            out += _stall(schedule, zones.walker(own_revisions[-1]), due_before_ms)
        occurrences += accounted
    return out, occurrences


def _checkpoints(
    schedule: dict[str, Any],
    spans: list[Span],
    revisions: list[dict[str, Any]],
    pruned: dict[str, Any] | None,
    since_ms: int | None,
) -> tuple[list[Finding], int | None]:
    """DESIGN §7: a pruned span is proven by its checkpoints, chained and counting it exactly.

    Returns the findings and where occurrence accounting starts (the latest boundary).
    """
    if pruned is None:
        return [], since_ms
    sid, below = schedule["id"], int(pruned["covered_below_ms"])
    out = []
    if not pruned["linked"] or int(pruned["top_seq"]) != int(pruned["checkpoints"]):
        out.append(Finding("checkpoint", sid, "the checkpoint chain is broken or has a gap"))
    due = sum(len(span.walker.between(span.low, min(span.high, below))) for span in spans)
    accounted = int(pruned["cron_runs"]) + int(pruned["skipped"])
    # Revision 1 `migrated`: Runs from before accounting began were removed and counted too.
    legacy = bool(revisions) and revisions[0]["reason"] == "migrated"
    if accounted < due or (accounted != due and not legacy):
        detail = f"checkpoints account for {accounted} occurrence(s) below {below}, not {due}"
        out.append(Finding("checkpoint", sid, detail))
    return out, below if since_ms is None else max(since_ms, below)


def _stall(schedule: dict[str, Any], walker: Walker, due_before_ms: int) -> list[Finding]:
    """Occurrences due before `due_before_ms` still at or past the cursor: nobody decided them."""
    cursor, end_at = schedule["next_due_at_ms"], schedule["end_at_ms"]
    if cursor is None:
        return []
    high = due_before_ms if end_at is None else min(due_before_ms, end_at + 1)
    stalled = walker.between(cursor, high)
    if not stalled:
        return []
    detail = (
        f"{len(stalled)} occurrence(s) from {stalled[0]} to {stalled[-1]}, due before"
        f" {due_before_ms}, are still past the cursor {cursor}"
    )
    return [Finding("stall", schedule["id"], detail)]


def _group(rows: list[dict[str, Any]]) -> dict[int, list[dict[str, Any]]]:
    """Return the rows of each schedule, in their order."""
    grouped: dict[int, list[dict[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["schedule_id"], []).append(row)
    return grouped


def _claim(schedule: dict[str, Any], now_ms: int, grace_ms: int) -> list[Finding]:
    """No claim left at rest: a claim expired longer than the grace ago (DESIGN §3, §14)."""
    expires = schedule["claim_expires_at_ms"]
    if expires is None or expires + grace_ms >= now_ms:
        return []
    return [
        Finding(
            "stale_claim",
            schedule["id"],
            f"claim of {schedule['claim_owner_id']!r} expired at {expires}, {now_ms - expires} ms"
            f" before the database clock (grace {grace_ms} ms)",
        )
    ]


def _shape(sid: int, run: dict[str, Any], schedule: dict[str, Any]) -> list[Finding]:
    """DESIGN §5, §14: 1 Run : 1 first attempt : run.admitted + attempt.queued, at commit time."""
    problems = []
    if run["task_id"] != schedule["task_id"]:
        problems.append(f"has task {run['task_id']}, its schedule {schedule['task_id']}")
    if run["first_attempts"] != 1 or run["first_attempts_off_time"]:
        problems.append(
            f"has {run['first_attempts']} first attempt(s), {run['first_attempts_off_time']}"
            " not at its commit time"
        )
    if run["admitted_events"] != 1 or run["admitted_events_off_time"]:
        problems.append(f"has {run['admitted_events']} run.admitted event(s) (or off time)")
    if run["queued_events"] != run["attempts"] or (
        run["first_queued_at_ms"] is not None and run["first_queued_at_ms"] != run["created_at_ms"]
    ):
        problems.append(
            f"has {run['queued_events']} attempt.queued event(s) for {run['attempts']} attempt(s)"
            " (or the first not at its commit time)"
        )
    return [Finding("shape", sid, f"run {run['id']} {problem}") for problem in problems]
