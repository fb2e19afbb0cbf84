"""Read `mutants.toml`, generate every mutant of the configured files, pick the CI sample.

Generation is deterministic: files in configuration order, sites in file order, ids from
`model.name_mutants`. The sample is a pure function of the ids and the seed.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import py_mutants
import sql_mutants
import sql_tokens
from model import ROOT, Mutant, Site, name_mutants

CONFIG = Path(__file__).with_name("mutants.toml")


@dataclass(frozen=True)
class Config:
    """The parts of mutants.toml the runner uses."""

    modules: tuple[str, ...]
    exclude: tuple[str, ...]
    sql_files: tuple[str, ...]
    function_files: tuple[str, ...]
    states: tuple[tuple[str, ...], ...]
    goal_modules: tuple[str, ...]
    goal_percent: int
    suites: tuple[str, ...]
    test_timeout_s: int
    test_timeout_floor_s: float
    test_timeout_factor: float
    mutant_timeout_s: int
    selection_floor_s: int
    selection_factor: float
    sample_size: int
    sample_seed: str


def load_config(path: Path = CONFIG) -> Config:
    """Read the configuration; SQL globs are expanded to sorted file lists."""
    data: dict[str, Any] = tomllib.loads(path.read_text())
    sql_files = sorted(
        {
            match.relative_to(ROOT).as_posix()
            for pattern in data["sql"]["files"]
            for match in ROOT.glob(pattern)
        }
    )
    return Config(
        modules=tuple(data["python"]["modules"]),
        exclude=tuple(data["python"]["exclude"]),
        sql_files=tuple(sql_files),
        function_files=tuple(data["sql"].get("functions", [])),
        states=tuple(tuple(group) for group in data["sql"]["states"]),
        goal_modules=tuple(data["goal"]["modules"]),
        goal_percent=int(data["goal"]["percent"]),
        suites=tuple(data["suites"]["folders"]),
        test_timeout_s=int(data["run"]["test-timeout-s"]),
        test_timeout_floor_s=float(data["run"]["test-timeout-floor-s"]),
        test_timeout_factor=float(data["run"]["test-timeout-factor"]),
        mutant_timeout_s=int(data["run"]["mutant-timeout-s"]),
        selection_floor_s=int(data["run"]["selection-floor-s"]),
        selection_factor=float(data["run"]["selection-factor"]),
        sample_size=int(data["sample"]["size"]),
        sample_seed=str(data["sample"]["seed"]),
    )


def generate_all(config: Config) -> list[Mutant]:
    """Return every mutant of the configured Python modules and SQL files."""
    chosen = py_mutants.operators(config.exclude)
    mutants: list[Mutant] = []
    for module in config.modules:
        source = (ROOT / module).read_text()
        sites = [
            Site(p.operator, (p.start, p.end), p.target, occurrence=p.occurrence)
            for p in py_mutants.positions(source, chosen)
        ]
        mutants += name_mutants("python", module, source, sites)
    for sql_file in config.sql_files:
        text = (ROOT / sql_file).read_text()
        statement = Path(sql_file).stem
        sites = [
            Site(found.operator, (found.edit.start, found.edit.end), statement, found.edit)
            for found in sql_mutants.generate(text, config.states)
        ]
        mutants += name_mutants("sql", sql_file, text, sites)
    callers = _callers(config.sql_files)
    bodies = {m: sql_mutants.definer_bodies((ROOT / m).read_text()) for m in config.function_files}
    for position, migration in enumerate(config.function_files):
        text = (ROOT / migration).read_text()
        # A function a later migration replaces is dead code here: only its last body runs.
        replaced = {
            body.function.lower()
            for later in config.function_files[position + 1 :]
            for body in bodies[later]
        }
        sites = [
            Site(
                found.operator,
                (body.start + found.edit.start, body.start + found.edit.end),
                callers.get(body.function.lower(), ""),
                replace(
                    found.edit,
                    start=body.start + found.edit.start,
                    end=body.start + found.edit.end,
                ),
            )
            for body in bodies[migration]
            if body.function.lower() not in replaced
            for found in sql_mutants.generate(body.text, config.states)
        ]
        mutants += name_mutants("sql", migration, text, sites)
    return mutants


def _callers(sql_files: tuple[str, ...]) -> dict[str, str]:
    """Map each `ql3.<function>` a statement calls to that statement's name (its selection key).

    A function no statement calls has no key: its mutants are untested, which the report shows.
    """
    found: dict[str, str] = {}
    for sql_file in sql_files:
        tokens = sql_tokens.tokenize((ROOT / sql_file).read_text())
        text = " ".join(token.text for token in tokens if token.code).lower()
        for name in re.findall(r"\bql3\s*\.\s*([a-z_0-9]+)\s*\(", text):
            found.setdefault(f"ql3.{name}", Path(sql_file).stem)
    return found


def realize(mutant: Mutant) -> Mutant:
    """Return the mutant with its edit (Python edits are made by cosmic-ray on demand)."""
    if mutant.edit is not None:
        return mutant
    source = (ROOT / mutant.file).read_text()
    return replace(mutant, edit=py_mutants.realize(source, mutant.operator, mutant.occurrence))


def seeded_order(mutants: list[Mutant], config: Config) -> list[Mutant]:
    """Return the mutants in the order of a hash of the sample seed and each id.

    A pseudo-random order fixed by the ids alone: any prefix of one module's mutants in this
    order is a uniform sample of them, so a module run in part still gives an unbiased score
    (`report.lower_bound`). The CI sample and `--per-module` both take prefixes of it.
    """
    seed = config.sample_seed
    return sorted(mutants, key=lambda m: hashlib.sha256(f"{seed}|{m.id}".encode()).digest())


def sample(mutants: list[Mutant], config: Config) -> list[Mutant]:
    """Return the CI sample: hash order within each module, taken round-robin over modules.

    Modules come in a fixed order: the goal modules first (as listed), then the other Python
    modules, then the other SQL files, so a small sample still reaches every goal module.
    """
    by_module: dict[str, list[Mutant]] = {}
    for mutant in mutants:
        by_module.setdefault(mutant.module, []).append(mutant)
    goal = [name for name in config.goal_modules if name in by_module]
    rest = sorted(set(by_module) - set(goal), key=lambda name: (name.startswith("sql/"), name))
    queues = [seeded_order(by_module[name], config) for name in (*goal, *rest)]
    picked: list[Mutant] = []
    while len(picked) < config.sample_size and any(queues):
        for queue in queues:
            if queue and len(picked) < config.sample_size:
                picked.append(queue.pop(0))
    order = {m.id: index for index, m in enumerate(mutants)}
    return sorted(picked, key=lambda m: order[m.id])
