"""Render a run: the per-module score table (EVIDENCE.md block) and every mutant (MUTANTS.md).

A module's score is caught / (valid - equivalent): valid mutants are those judged (caught,
survived, timeout) or that no test runs (untested); invalid ones are listed apart; survivors
explained in `equivalent.toml` leave the denominator, each with its reason in MUTANTS.md.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

from model import VALID, Verdict

if TYPE_CHECKING:
    from collections.abc import Iterable

EQUIVALENT = Path(__file__).with_name("equivalent.toml")
START = "<!-- mutants:start -->"
END = "<!-- mutants:end -->"
ABOUT = (
    "Mutants of the protocol are generated, not chosen: cosmic-ray 8 (its operators, less the"
    " exclusions in `tools/mutants/mutants.toml`) for the Python modules, and QL3's own"
    " token-based operator set for the `sql/` statements and the bodies of the worker's"
    " SECURITY DEFINER functions in migration 0007 (drop a `WHERE`/`ON`/`IF` conjunct, flip a"
    " comparison, change a constant or a state literal, drop a `SET` column); a function's"
    " mutants are judged by the tests sending the statement that calls it and the tests that"
    " call it by name. cosmic-ray was"
    " chosen over mutmut 3 after trying both: mutmut 3 compiles every mutant of a file into"
    " one trampolined copy that imports mutmut at run time and mutates only function bodies"
    " (not decorated functions, class bodies or constants), while cosmic-ray returns the"
    " module with exactly one change anywhere, which replaces the installed file of the"
    " session's real wheels (built with `uv build --no-sources`; a pure-Python wheel installs"
    " exactly that file) before the tests run. Runs from 2026-12-05 on swap the file; earlier"
    " ones built and installed a whole wheel per mutant, to the same effect, 5-10 times slower."
    " Each mutant is judged by the tests that run the mutated line (coverage contexts of one"
    " run of the package tests on the unmutated wheels) or send the mutated statement, and"
    " only a failed assertion is a kill: an import error, a SQL error (SQLSTATE class 42) or a"
    " crash before any assertion makes the mutant invalid (listed apart), and a test stopped by"
    " pytest-timeout is a timeout, not a kill (the tests' own waits assert, so a hang means"
    " no assertion judged it)."
)


@dataclass(frozen=True)
class Row:
    """One mutant's line of the report."""

    id: str
    module: str
    line: int
    operator: str
    before: str
    after: str
    verdict: Verdict
    reason: str
    seconds: float
    selected: int


def load_equivalents(path: Path = EQUIVALENT) -> dict[str, str]:
    """Return mutant id -> why it is equivalent (or cannot be told apart by any test)."""
    if not path.exists():
        return {}
    data: dict[str, Any] = tomllib.loads(path.read_text())
    return {str(key): str(value) for key, value in data.get("equivalent", {}).items()}


def _counts(rows: Iterable[Row], equivalents: dict[str, str]) -> dict[str, int]:
    counts = dict.fromkeys(("generated", *(v.value for v in Verdict), "equivalent"), 0)
    for row in rows:
        counts["generated"] += 1
        counts[row.verdict.value] += 1
        if row.verdict is not Verdict.CAUGHT and row.verdict in VALID and row.id in equivalents:
            counts["equivalent"] += 1
    return counts


def score(counts: dict[str, int]) -> tuple[int, int]:
    """Return (caught, valid less equivalent)."""
    valid = sum(counts[v.value] for v in VALID) - counts["equivalent"]
    return counts["caught"], valid


def _percent(caught: int, valid: int) -> str:
    return f"{100 * caught / valid:.0f} %" if valid else "-"


def lower_bound(caught: int, valid: int, confidence: float = 0.95) -> float:
    """Return the Wilson score interval's lower end for caught / valid at `confidence`.

    For a module run in part: its run mutants are a prefix of the seeded order, a uniform
    sample of the module, so with this confidence at least this share of all its valid
    mutants would be caught.
    """
    if not valid:
        return 0.0
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    share = caught / valid
    centre = share + z * z / (2 * valid)
    spread = z * math.sqrt(share * (1 - share) / valid + z * z / (4 * valid * valid))
    return (centre - spread) / (1 + z * z / valid)


def _prefix(rows: list[Row], ordered: list[str]) -> list[Row]:
    """Return the rows of the longest prefix of `ordered` whose every mutant has a row."""
    by_id = {row.id: row for row in rows}
    prefix: list[Row] = []
    for mutant in ordered:
        if mutant not in by_id:
            break
        prefix.append(by_id[mutant])
    return prefix


def _bound_cell(
    group: list[Row], ordered: list[str] | None, equivalents: dict[str, str]
) -> tuple[str, float | None]:
    """Return the bound cell of a sample and the 95 % bound itself (None when every one ran)."""
    if ordered is None:
        return "", None
    if len(group) >= len(ordered):
        return "all run", None
    sample = _prefix(group, ordered)
    caught, valid = score(_counts(sample, equivalents))
    bound = lower_bound(caught, valid)
    return f"first {len(sample)} in seeded order: {caught} / {valid}, >= {100 * bound:.1f} %", bound


def module_table(
    rows: list[Row],
    equivalents: dict[str, str],
    goal: tuple[str, ...],
    order: dict[str, list[str]] | None = None,
    goal_order: list[str] | None = None,
) -> list[str]:
    """Return the per-module score table (goal modules marked), with totals.

    With `order` (module -> every generated mutant's id, in the seeded order), a module run in
    part gets the 95 % lower bound of its score from the prefix of that order that ran. With
    `goal_order` (every goal mutant's id in the same hash order), the goal row gets the 95 %
    lower bound of the goal modules' pooled score from the longest prefix of that order that
    ran: one uniform sample of all of them, so one bound, with no correction for combining.
    """
    lines = [
        (
            "| module | goal | generated | mutants run | caught | survived | equivalent | timeout |"
            " untested | invalid | score (caught / valid) | sampled: 95 % lower bound |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    modules = sorted({row.module for row in rows}, key=lambda m: (m.startswith("sql/"), m))
    order = order or {}
    for name in modules:
        group = [r for r in rows if r.module == name]
        lines.append(_row(name, group, equivalents, is_goal=name in goal, ordered=order.get(name)))
    goal_rows = [r for r in rows if r.module in goal]
    goal_line = _row("**goal modules**", goal_rows, equivalents)
    if goal_order:
        cell, _ = _bound_cell(goal_rows, goal_order, equivalents)
        goal_line = goal_line[: -len("|")].rstrip().removesuffix("|") + f"| {cell} |"
    lines += [goal_line, _row("**all**", rows, equivalents)]
    return lines


def _row(
    name: str,
    group: list[Row],
    equivalents: dict[str, str],
    *,
    is_goal: bool = False,
    ordered: list[str] | None = None,
) -> str:
    c = _counts(group, equivalents)
    caught, valid = score(c)
    label = name if name.startswith("**") else f"`{name}`"
    generated = str(len(ordered)) if ordered is not None else ""
    cell, _ = _bound_cell(group, ordered, equivalents)
    return (
        f"| {label} | {'yes' if is_goal else ''} | {generated} | {c['generated']} |"
        f" {c['caught']} | {c['survived'] - _eq(group, equivalents, Verdict.SURVIVED)} |"
        f" {c['equivalent']} | {c['timeout']} | {c['untested']} | {c['invalid']} |"
        f" {caught} / {valid} = {_percent(caught, valid)} | {cell} |"
    )


def _eq(rows: list[Row], equivalents: dict[str, str], verdict: Verdict) -> int:
    return sum(1 for r in rows if r.verdict is verdict and r.id in equivalents)


def evidence_block(
    rows: list[Row],
    equivalents: dict[str, str],
    context: dict[str, str],
    named: list[str],
    *,
    order: dict[str, list[str]] | None = None,
    goal_order: list[str] | None = None,
) -> str:
    """Return the EVIDENCE.md block: what the run was, the module scores, the named mutants."""
    lines = [
        START,
        "## Mutants of the real code",
        "",
        f"Written by `{context['command']}` (`tools/mutants/`); do not edit by hand. {ABOUT}",
        "",
        (
            f"Run against commit `{context['commit']}`: {context['selection']}. Every mutant,"
            " its change, verdict and judging test: [MUTANTS.md](MUTANTS.md). Tests that"
            f" passed on the unmutated wheels: {context['control']}."
        ),
        "",
        *module_table(rows, equivalents, tuple(context["goal"].split(",")), order, goal_order),
        "",
        (
            f"Goal: at least {context['percent']} % of the valid mutants of the goal modules"
            " caught. The full run is one command: `uv run nox -s mutants -- --all` (it maps"
            " the tests anew, runs every generated mutant and rewrites this block and"
            " MUTANTS.md); CI (`nox -s mutants`) runs a fixed sample and fails on a sampled"
            " valid mutant that survives without an entry in `tools/mutants/equivalent.toml`."
            " The test map alone is made anew by `uv run nox -s mutants -- --map-only`; a map"
            " naming a test that no longer exists stops the run with the stale ids, and a"
            " selection that ran no test is `untested`, never `survived`."
        ),
        "",
        (
            "The goal modules hold more mutants than one sitting runs (each takes 10 s to a few"
            " minutes), so they are judged as a uniform sample: every mutant's place in one"
            " seeded order is a hash of the sample seed and its id (the order the CI sample takes"
            " too). `--goal-sample N` takes the next N of that order over all goal modules,"
            " `--module M --per-module N` the next N of M's part of it, each passing over the"
            " mutants judged in the `--keep` records. A module run in part shows, in the last"
            " column, the Wilson 95 % lower bound of its score over the longest prefix of its"
            " order that ran; the goal row shows the same over the longest prefix of the goal"
            " modules' one order, a uniform sample of all their mutants, so with 95 % confidence"
            " at least that share of every valid goal mutant is caught."
        ),
        "",
        "### Named mutants",
        "",
        (
            "Kept by hand (`tools/mutants/catalog.toml`) where a generated mutant cannot stand"
            " in: changes judged end to end by chaos scenarios, and semantic slips no operator"
            " makes. The others of the earlier hand-picked table were folded: the SQL operator"
            " set generates the same boundary flips and dropped conjuncts, cosmic-ray the same"
            " narrowed `except`. The entries on the worker functions of migration 0007 stay"
            " beside the generated mutants of those bodies: they move a bound 1 ms earlier or"
            " drop an added term (the successor grace), which no operator of the set does."
        ),
        "",
        "| mutant | what it breaks | file | verdict | judged by | seconds |",
        "|---|---|---|---|---|---|",
        *named,
        END,
    ]
    return "\n".join(lines) + "\n"


def mutants_page(
    rows: list[Row],
    equivalents: dict[str, str],
    context: dict[str, str],
    *,
    order: dict[str, list[str]] | None = None,
    goal_order: list[str] | None = None,
) -> str:
    """Return docs/MUTANTS.md: every mutant of the run, module by module."""
    lines = [
        "# Mutants of the latest run",
        "",
        (
            f"Written by `{context['command']}` (`tools/mutants/`) against commit"
            f" `{context['commit']}`; do not edit by hand. {context['selection']}. Scores and"
            " method: [EVIDENCE.md](EVIDENCE.md#mutants-of-the-real-code). A survivor with an"
            " entry in `tools/mutants/equivalent.toml` shows its reason."
        ),
        "",
        *module_table(rows, equivalents, tuple(context["goal"].split(",")), order, goal_order),
    ]
    for module in sorted({r.module for r in rows}, key=lambda m: (m.startswith("sql/"), m)):
        lines += [
            "",
            f"## `{module}`",
            "",
            "| id | line | operator | before | after | verdict | judged by / reason | tests | s |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in (r for r in rows if r.module == module):
            verdict = row.verdict.value
            reason = row.reason
            if row.id in equivalents and row.verdict is not Verdict.CAUGHT:
                verdict, reason = f"{verdict} (equivalent)", equivalents[row.id]
            lines.append(
                f"| `{row.id}` | {row.line} | {row.operator} | {_code(row.before)} |"
                f" {_code(row.after)} | {verdict} | {_cell(reason)} | {row.selected} |"
                f" {row.seconds:.0f} |"
            )
    return "\n".join(lines) + "\n"


_CODE_WIDTH = 110


def _code(text: str) -> str:
    text = text if len(text) <= _CODE_WIDTH else text[: _CODE_WIDTH - 3] + "..."
    return "`" + text.replace("`", "'").replace("|", "\\|") + "`" if text else ""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


def write_block(path: Path, block: str) -> None:
    """Replace the mutants block of `path` (or append one), leaving the rest of the file alone."""
    text = path.read_text() if path.exists() else ""
    if START in text and END in text:
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        text = head + block.rstrip("\n") + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block
    path.write_text(text)
