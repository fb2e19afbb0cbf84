"""Render docs/EVIDENCE.md from the chaos scenarios of the latest run (DESIGN §14)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from findings import CHECK_FINDINGS, RECORD_ITEMS, SERVER_SETTINGS
from findings_execution import WORKER_FINDINGS, WRITE_PATH_FINDINGS, ZONE_FINDINGS
from harness import BASELINE_WORST_MS, CYCLE_SLACK_MS, POLL_INTERVAL_MS, ROOT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness import Evidence

TARGET = ROOT / "docs" / "EVIDENCE.md"

# Table order (tests may run in random order; the document should not shuffle).
ORDER = (
    "baseline",
    "sigkill-replicas",
    "lost-commit-reply",
    "lost-commit-reply-promotion",
    "trigger-lost-reply",
    "db-clock-steps",
    "node-clock-skew",
    "doctored-zone-files",
    "physical-promotion",
    "serialization-storm",
    "network-faults",
    "async-replication-loses-acks",
    "sync-replication-keeps-acks",
    "patroni-failovers",
    "patroni-unsafe-ack",
    "negative-node-clock-fast",
    "negative-node-clock-commit",
    "negative-unique-dropped",
    "negative-readmit-after-lost-reply",
    "worker-sigkill",
    "worker-retry-after-failure",
    "worker-timeout",
    "worker-db-restart",
    "worker-lost-connection",
    "worker-transactional-sigkill",
    "worker-overlap-skip",
    "zone-switch",
    "backfill-crash",
)


def _rank(row: Evidence) -> tuple[int, str]:
    return (ORDER.index(row.scenario) if row.scenario in ORDER else len(ORDER), row.scenario)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def render(rows: Sequence[Evidence]) -> str:
    """Return the whole document for `rows`."""
    lines = [
        "# QL3 fault evidence",
        "",
        (
            "Written by the chaos suite (`nox -s chaos`, `chaos/`) at the end of its latest run;"
            " do not edit by hand. Every scenario runs real PostgreSQL and real `ql3 run`"
            " processes and ends with its own expectations: every expected occurrence admitted"
            " exactly once, none early, 1 run : 1 attempt : 2 events, no claim left at rest;"
            " judged by the test kit's independent oracle (`ql3_testkit.oracle_verdict`: its own"
            " SQL and cronsim, no product code) and by `ql3 verify --json` run as a subprocess;"
            " both must find the history clean."
            " Times are database times; durations are monotonic."
        ),
        "",
        (
            "The `worker-*` scenarios also run real `ql3 worker` processes executing each Run's"
            " shell command (`worker-transactional-sigkill`: a service running a transactional"
            " Python task with `Worker`); there a Run may have several attempts, and the verdict"
            " reads them"
            " back once none is queued or running: attempts numbered 1..n, exactly one"
            " succeeded and last (or all `max_attempts` failed, for a command that always"
            " fails), every attempt that did not succeed followed by a successor created no"
            " earlier than its end and started no earlier than its backoff (database time), the"
            " partial UNIQUE index `attempts_one_live` in place (chaos/workers.py)."
        ),
        "",
        (
            "Expected occurrences come from an engine independent of QL3 (`chaos/expected.py`:"
            " cronsim over zoneinfo instants, 6-field expressions with seconds first); the"
            " harness never imports QL3's cron functions, so a cron bug in QL3 cannot agree with"
            " its own verdict. Each schedule's first cursor is checked against it too."
        ),
        "",
        (
            "Each lateness bound is printed as its arithmetic. `cycle slack` ="
            f" {CYCLE_SLACK_MS} ms: an idle replica wakes 1 ms after the database's next-due hint"
            " (claim expiries included), so a due occurrence waits only for round trips and the"
            " machine's scheduling noise; measured in the no-fault baseline under the shared"
            f" 2-core machine's load (load average 5-6): p99 24-104 ms, worst {BASELINE_WORST_MS}"
            " ms of 144 admissions; allowed ~2.4x, and below 300 ms so that a replica waking"
            " 300 ms late fails the baseline (named mutant `replica-wakes-300-ms-late`). The poll"
            f" interval ({POLL_INTERVAL_MS} ms) enters only a bound whose fault withholds the hint."
            " Every fault adds only its own stated cost."
        ),
        "",
        "## Scenarios of the latest run",
        "",
        (
            "| scenario | item | faults injected | expected | admitted | duplicated | early"
            " | missing | 40001 retries | max lateness ms | lateness bound ms | duration s"
            " | outcome | measured |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sorted(rows, key=_rank):
        cells = [
            row.scenario,
            row.items,
            "; ".join(row.faults) or "none",
            row.expected,
            row.admitted,
            row.duplicated,
            row.early,
            row.missing,
            row.retries_40001,
            row.max_lateness_ms,
            row.bound,
            row.duration_s,
            row.outcome,
            "; ".join(row.notes),
        ]
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    lines += [
        "",
        "## The evidence list (DESIGN §14), item by item",
        "",
        "| item | evidence | where QL3 proves it |",
        "|---|---|---|",
    ]
    lines += [f"| {number} | {claim} | {where} |" for number, claim, where in RECORD_ITEMS]
    lines += ["", "## The findings of the reviews and where each is proven now", ""]
    for part, findings in (
        ("Exact after admission: switching zone rules", ZONE_FINDINGS),
        ("Exact after admission: workers", WORKER_FINDINGS),
        ("Exact after admission: other write paths and inputs", WRITE_PATH_FINDINGS),
        ("Evidence that can fail: verify, the oracle, the model, the bounds", CHECK_FINDINGS),
    ):
        lines += [f"### {part}", ""]
        lines += [f"- {finding} Proven by {where}." for finding, where in findings]
        lines += [""]
    lines.pop()
    lines += ["", "## Server settings the scenarios rely on", ""]
    lines += [f"- {setting}" for setting in SERVER_SETTINGS]
    lines += [
        "",
        (
            "Negative controls (deliberately broken admitters: node clock instead of the"
            " database clock, UNIQUE constraint dropped, re-admitting after a lost reply) must"
            " each be caught by the checker; their rows count the violations found, so a checker"
            " that cannot fail would show up here as a failed scenario."
        ),
        "",
    ]
    return "\n".join(lines)


# The mutants session (tools/mutants) owns the block between these markers; keep it as it is.
MUTANTS_START = "<!-- mutants:start -->"
MUTANTS_END = "<!-- mutants:end -->"


def _mutants_block() -> str:
    """Return the kill table the mutants session last wrote into docs/EVIDENCE.md, if any."""
    if not TARGET.exists():
        return ""
    text = TARGET.read_text(encoding="utf-8")
    start, end = text.find(MUTANTS_START), text.find(MUTANTS_END)
    if start < 0 or end < start:
        return ""
    return text[start : end + len(MUTANTS_END)] + "\n"


def write_evidence(rows: Sequence[Evidence]) -> None:
    """Write docs/EVIDENCE.md, keeping the mutants session's kill table."""
    TARGET.parent.mkdir(parents=True, exist_ok=True)
    block = _mutants_block()
    text = render(rows)
    TARGET.write_text(text.rstrip("\n") + "\n\n" + block if block else text, encoding="utf-8")
