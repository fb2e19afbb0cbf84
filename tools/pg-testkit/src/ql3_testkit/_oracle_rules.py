"""The oracle's rules, written from DESIGN §4, §5 and §7, over rows read by `_oracle`.

For every revision of a schedule, its span runs from its first cursor to where it ended (the live
revision: to the schedule's cursor), never past the next revision's first cursor or the window's
end. Every cronsim occurrence of that span must be exactly one Run or inside exactly one skip
record; a Run that is no occurrence of any span, a Run admitted before its occurrence, or a skip
record that does not hold exactly the missed occurrences its policy had to pass is a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._oracle_cron import OracleError, Walker, count_in

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["Finding", "Span", "judge_schedule", "spans_of"]


@dataclass(frozen=True)
class Finding:
    """One broken rule: its kind, the schedule (None: the history as a whole), what was seen."""

    kind: str
    schedule_id: int | None
    detail: str

    def line(self) -> str:
        """One line for a failure message."""
        where = "history" if self.schedule_id is None else f"schedule {self.schedule_id}"
        return f"{self.kind}: {where}: {self.detail}"


@dataclass
class Span:
    """The occurrences one revision had to account for, [low, high), and who accounted them."""

    revision: dict[str, Any]
    walker: Walker
    low: int
    high: int
    occurrences: list[int] = field(default_factory=list)


def spans_of(
    schedule: dict[str, Any],
    revisions: Sequence[dict[str, Any]],
    walker_of: Callable[[dict[str, Any]], Walker],
) -> list[Span]:
    """Each revision's span (DESIGN §7: first cursor to where it ended, the live one its cursor)."""
    spans = []
    for index, rev in enumerate(revisions):
        if rev["first_cursor_ms"] is None:
            continue  # placed no cursor: nothing fell due under it
        low = max(rev["first_cursor_ms"], rev["start_at_ms"] or rev["first_cursor_ms"])
        live = rev["ended_at_ms"] is None
        end_cursor = schedule["next_due_at_ms"] if live else rev["end_cursor_ms"]
        end_at = rev["end_at_ms"]
        # No cursor left: the window ran out (exhausted), so the span reaches its end.
        high = end_cursor if end_cursor is not None else (end_at + 1 if end_at is not None else low)
        for later in revisions[index + 1 :]:
            if later["first_cursor_ms"] is not None:
                high = min(high, later["first_cursor_ms"])
                break
        if end_at is not None:
            high = min(high, end_at + 1)
        spans.append(Span(rev, walker_of(rev), low, high))
    return spans


def judge_schedule(  # one schedule's rows, read in one snapshot
    schedule: dict[str, Any],
    spans: Sequence[Span],
    runs: Sequence[dict[str, Any]],
    skips: Sequence[dict[str, Any]],
    *,
    since_ms: int | None,
    now_ms: int,
) -> tuple[list[Finding], int]:
    """Return the findings of one schedule and how many occurrences it had to account for."""
    sid = schedule["id"]
    out: list[Finding] = []
    floor = since_ms if since_ms is not None else -(2**63)
    cover: dict[int, list[str]] = {}  # occurrence -> who accounts for it ("run 5", "skip 2")
    for span in spans:
        span.occurrences = [t for t in span.walker.between(span.low, span.high) if t >= floor]
        cover.update((t, []) for t in span.occurrences)
    for run in runs:
        out += _judge_run(sid, run, spans, now_ms)
        cover.get(run["scheduled_for_ms"], []).append(f"run {run['id']}")
    runs_at = {run["scheduled_for_ms"] for run in runs}
    for skip in skips:
        out += _place_skip(sid, skip, spans, runs_at, cover)
    return out + _coverage(sid, cover), len(cover)


def _place_skip(
    sid: int,
    skip: dict[str, Any],
    spans: Sequence[Span],
    runs_at: set[int],
    cover: dict[int, list[str]],
) -> list[Finding]:
    """Judge a skip record in the span it begins in; count it for every occurrence it holds."""
    first, last = skip["first_skipped_ms"], skip["last_skipped_ms"]
    span = next((s for s in spans if s.low <= first < s.high), None)
    if span is None:
        detail = f"skip record {skip['id']} [{first}, {last}] lies in no revision's span"
        return [Finding("skip_record", sid, detail)]
    for other in spans:
        low = bisect_index(other.occurrences, first)
        for t in other.occurrences[low : bisect_index(other.occurrences, last + 1)]:
            cover[t].append(f"skip record {skip['id']}")
    return _judge_skip(sid, skip, span, runs_at)


def _coverage(sid: int, cover: dict[int, list[str]]) -> list[Finding]:
    """DESIGN §7: every occurrence is exactly one Run or inside exactly one skip record."""
    out = []
    missing = [t for t in sorted(cover) if not cover[t]]
    for t in sorted(cover):
        who = cover[t]
        if len(who) > 1:
            kind = "duplicate" if all(w.startswith("run") for w in who) else "skip_record"
            out.append(Finding(kind, sid, f"occurrence {t} is accounted {len(who)} times: {who}"))
    if missing:
        detail = (
            f"{len(missing)} occurrence(s) have no run and are in no skip record, the first"
            f" {missing[:5]}"
        )
        out.append(Finding("missing", sid, detail))
    return out


def bisect_index(values: list[int], at: int) -> int:
    """Return the index of the first value >= `at` in sorted `values`."""
    return len(values) - count_in(values, at, 2**63 - 1)


def _judge_run(sid: int, run: dict[str, Any], spans: Sequence[Span], now_ms: int) -> list[Finding]:
    at, created, rid = run["scheduled_for_ms"], run["created_at_ms"], run["id"]
    out = []
    if created < at:
        out.append(
            Finding("early", sid, f"run {rid} admitted at {created}, {at - created} ms early")
        )
    if created > now_ms:
        detail = f"run {rid} admitted at {created}, after the database clock {now_ms}"
        out.append(Finding("future", sid, detail))
    span = next((s for s in spans if s.low <= at < s.high), None)
    if span is None:
        first = spans[0].revision if spans else None
        # Runs admitted before accounting existed (a 'migrated' first revision) are judged only
        # by their place on revision 1's cron.
        legacy = first is not None and first["reason"] == "migrated" and at < spans[0].low
        if not (legacy and spans[0].walker.is_occurrence(at)):
            out.append(
                Finding("not_occurrence", sid, f"run {rid} admits {at}, in no revision's span")
            )
    elif not span.walker.is_occurrence(at):
        out.append(
            Finding(
                "not_occurrence",
                sid,
                f"run {rid} admits {at}, not an occurrence of {span.walker.cron!r}"
                f" (revision {span.revision['revision']})",
            )
        )
    return out


def _judge_skip(sid: int, skip: dict[str, Any], span: Span, runs_at: set[int]) -> list[Finding]:
    """Check that a skip record holds exactly the missed occurrences its decision passed (§4)."""
    first, last = skip["first_skipped_ms"], skip["last_skipped_ms"]
    walker, rev = span.walker, span.revision
    problems = []
    if not (walker.is_occurrence(first) and walker.is_occurrence(last)):
        problems.append("does not begin and end on occurrences")
    else:
        held = len(walker.between(first, last + 1))
        if held != skip["skipped_count"]:
            problems.append(f"counts {skip['skipped_count']}, its range holds {held}")
    if last >= span.high:
        problems.append(f"reaches past its revision's span (to {span.high})")
    if skip["reason"] == "misfire":
        problems += _misfire_problems(skip, rev, walker, runs_at)
    return [
        Finding("skip_record", sid, f"skip record {skip['id']} [{first}, {last}] {problem}")
        for problem in problems
    ]


def _misfire_problems(
    skip: dict[str, Any], rev: dict[str, Any], walker: Walker, runs_at: set[int]
) -> list[str]:
    """DESIGN §4: only missed occurrences are skipped; fire_once admits the latest missed one."""
    acquired, last = skip["claim_acquired_at_ms"], skip["last_skipped_ms"]
    grace = rev["misfire_grace_ms"]
    problems = []
    if skip["misfire_policy"] != rev["misfire_policy"]:
        problems.append(f"records policy {skip['misfire_policy']}, its revision has another")
    if acquired - last <= grace:
        problems.append(f"skips {last}, on time at the claim {acquired} (grace {grace} ms)")
    following = walker.first_after(last)
    if following is None:
        return problems
    if rev["misfire_policy"] == "fire_once" and following not in runs_at:
        problems.append(f"but fire_once admits the latest missed one, {following}: no run")
    in_window = rev["end_at_ms"] is None or following <= rev["end_at_ms"]
    if rev["misfire_policy"] == "skip" and acquired - following > grace and in_window:
        problems.append(f"stops before {following}, which that claim had missed too")
    return problems


def unreadable(cron: str, walker_error: OracleError) -> str:
    """Return the detail of a definition cronsim cannot read."""
    return f"cron {cron!r} cannot be read: {walker_error}"
