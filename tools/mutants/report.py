"""Render a run: the per-module score table (EVIDENCE.md block) and every mutant (MUTANTS.md).

A module's score is caught / (valid - equivalent): valid mutants are those judged (caught,
survived, timeout) or that no test runs (untested); invalid ones are listed apart; survivors
explained in `equivalent.toml` leave the denominator, each with its reason in MUTANTS.md.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
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
    " module with exactly one change anywhere, which is what is built into a real wheel"
    " (`uv build --no-sources`) and installed over the session's before the tests run."
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


def module_table(rows: list[Row], equivalents: dict[str, str], goal: tuple[str, ...]) -> list[str]:
    """Return the per-module score table (goal modules marked), with totals."""
    lines = [
        (
            "| module | goal | mutants run | caught | survived | equivalent | timeout | untested |"
            " invalid | score (caught / valid) |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    modules = sorted({row.module for row in rows}, key=lambda m: (m.startswith("sql/"), m))
    groups = [(m, [r for r in rows if r.module == m]) for m in modules]
    goal_rows = [r for r in rows if r.module in goal]
    groups += [("**goal modules**", goal_rows), ("**all**", rows)]
    for name, group in groups:
        c = _counts(group, equivalents)
        caught, valid = score(c)
        mark = "yes" if name in goal else ""
        lines.append(
            f"| {name if name.startswith('**') else f'`{name}`'} | {mark} | {c['generated']} |"
            f" {c['caught']} | {c['survived'] - _eq(group, equivalents, Verdict.SURVIVED)} |"
            f" {c['equivalent']} | {c['timeout']} | {c['untested']} | {c['invalid']} |"
            f" {caught} / {valid} = {_percent(caught, valid)} |"
        )
    return lines


def _eq(rows: list[Row], equivalents: dict[str, str], verdict: Verdict) -> int:
    return sum(1 for r in rows if r.verdict is verdict and r.id in equivalents)


def evidence_block(
    rows: list[Row], equivalents: dict[str, str], context: dict[str, str], named: list[str]
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
        *module_table(rows, equivalents, tuple(context["goal"].split(","))),
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


def mutants_page(rows: list[Row], equivalents: dict[str, str], context: dict[str, str]) -> str:
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
        *module_table(rows, equivalents, tuple(context["goal"].split(","))),
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
