"""The hand-picked mutants that generated ones cannot replace (`catalog.toml`).

Two kinds stay: changes judged end to end by the chaos scenarios (a replica waking late shows
only as lateness against the chaos bound; zone files read from the node show only when replicas
decide differently), and semantic slips no operator produces (reading the cursor instead of the
claim time, widening a single-value cron range, a wrong argument). Each is one textual change
(`find` must occur exactly once: a stale entry fails the run) judged like a generated mutant:
only a failed assertion is a kill.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from model import ROOT

CATALOG = Path(__file__).with_name("catalog.toml")


@dataclass(frozen=True)
class Named:
    """One named change to the product and the tests that must notice it."""

    name: str
    what: str
    file: str
    find: str
    replace: str
    suite: str
    select: tuple[str, ...]

    @property
    def tests(self) -> list[str]:
        """Return the selection as test ids from the repository root."""
        return [f"{self.suite}/{item}" for item in self.select]

    def mutated(self) -> str:
        """Return the file's text with the change applied; it must match exactly once."""
        text = (ROOT / self.file).read_text()
        matches = text.count(self.find)
        if matches != 1:
            raise SystemExit(
                f"mutants: {self.name}: {self.find!r} occurs {matches} times in {self.file};"
                " the catalog no longer matches the code"
            )
        return text.replace(self.find, self.replace)


def load(path: Path = CATALOG) -> list[Named]:
    """Read the catalog; names must be unique."""
    entries = tomllib.loads(path.read_text())["mutant"]
    named = [
        Named(
            name=entry["name"],
            what=entry["what"],
            file=entry["file"],
            find=entry["find"],
            replace=entry["replace"],
            suite=entry["suite"],
            select=tuple(entry["select"]),
        )
        for entry in entries
    ]
    names = [entry.name for entry in named]
    if len(set(names)) != len(names):
        raise SystemExit(f"mutants: duplicate names in {path}")
    return named
