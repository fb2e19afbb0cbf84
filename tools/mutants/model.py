"""What a generated mutant is, how it is named, and the verdicts a run can reach.

A mutant is one edit of one shipped file: replace `original[start:end]` with `replacement`.
Both generators (cosmic-ray for Python, `sql_mutants.py` for SQL) reduce to that, so applying,
naming and reporting are one code path. Ids are stable across unrelated edits: they hash the
file, the operator, the text of the changed line and the change itself (plus a counter for
identical changes on identical lines), not offsets or line numbers, so `equivalent.toml` keeps
pointing at the same mutant while the code around it moves.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class Verdict(Enum):
    """How a mutant ended.

    `caught`: a selected test failed an assertion (the only kind of kill). `survived`: every
    selected test passed. `timeout`: a test hit the per-test bound without any assertion failing
    (not a kill: the tests' own waits assert, so a hang means nothing judged the mutant).
    `invalid`: the mutant could not be judged (it did not build or import, its SQL does not
    parse, or a test crashed with an error before any assertion); listed apart, outside the score.
    `untested`: no test runs the mutated code (listed, counted as not caught).
    """

    CAUGHT = "caught"
    SURVIVED = "survived"
    TIMEOUT = "timeout"
    INVALID = "invalid"
    UNTESTED = "untested"


# Verdicts that count in a module's score (caught / valid).
VALID = (Verdict.CAUGHT, Verdict.SURVIVED, Verdict.TIMEOUT, Verdict.UNTESTED)


@dataclass(frozen=True)
class Edit:
    """One textual change of a file: `original[start:end]` becomes `replacement`."""

    start: int
    end: int
    replacement: str

    def apply(self, original: str) -> str:
        """Return `original` with this edit applied."""
        return original[: self.start] + self.replacement + original[self.end :]


@dataclass(frozen=True)
class Mutant:
    """One generated mutant: where, which operator, and the edit."""

    id: str
    kind: str  # "python" or "sql"
    file: str  # path relative to the repository root
    line: int  # 1-based line of the edit's start
    operator: str
    span: tuple[int, int]  # offsets of the original text the operator changes
    target: str  # selection key: the enclosing definition (Python) or the statement name (SQL)
    edit: Edit | None = None  # None until realized (cosmic-ray makes Python edits on demand)
    occurrence: int = 0  # cosmic-ray's occurrence of the operator in the module (Python)

    @property
    def package(self) -> str:
        """Return the package folder the file ships in (`packages/<this>/src/...`)."""
        return self.file.split("/")[1]

    @property
    def module(self) -> str:
        """Return the report's module name: the file name under its folder for SQL.

        `_decision.py`, `repository/_claims.py` in a room, `sql/x.sql`, or `migrations/x.sql` for
        the functions a migration defines.
        """
        folder, name = self.file.rsplit("/", 2)[-2:]
        if self.kind != "sql":
            # A module of a room (a subpackage) keeps its room: `verify/_rules.py`
            return name if folder.startswith("ql3_") else f"{folder}/{name}"
        return f"migrations/{name}" if folder == "migrations" else f"sql/{name}"


def describe(edit: Edit, original: str) -> tuple[str, str]:
    """Return the changed line(s) before and after the edit, whitespace folded, for the report."""
    first = original.rfind("\n", 0, edit.start) + 1
    last = original.find("\n", edit.end)
    last = len(original) if last < 0 else last
    before = original[first:last]
    after = before[: edit.start - first] + edit.replacement + original[edit.end : last]
    return " ".join(before.split()), " ".join(after.split())


def line_of(text: str, offset: int) -> int:
    """Return the 1-based line number of `offset` in `text`."""
    return text.count("\n", 0, offset) + 1


@dataclass(frozen=True)
class Site:
    """A mutation site before naming: operator, span, selection target and how to realize it."""

    operator: str
    span: tuple[int, int]
    target: str
    edit: Edit | None = None
    occurrence: int = 0


def name_mutants(kind: str, file: str, original: str, sites: list[Site]) -> list[Mutant]:
    """Give each site of one file its stable id, in file order."""
    lines = original.splitlines()
    seen: dict[str, int] = {}
    mutants: list[Mutant] = []
    for site in sorted(sites, key=lambda item: (item.span, item.operator, item.occurrence)):
        line = line_of(original, site.span[0])
        replacement = site.edit.replacement if site.edit is not None else ""
        key = "|".join(
            (file, site.operator, lines[line - 1].strip(), original[slice(*site.span)], replacement)
        )
        count = seen.get(key, 0)
        seen[key] = count + 1
        digest = hashlib.sha256(f"{key}|{count}".encode()).hexdigest()[:8]
        mutants.append(
            Mutant(
                id=f"{kind[:2]}:{Path(file).stem}:{digest}",
                kind=kind,
                file=file,
                line=line,
                operator=site.operator,
                span=site.span,
                target=site.target,
                edit=site.edit,
                occurrence=site.occurrence,
            )
        )
    return mutants
