"""Which mutants a run takes, and how earlier runs' records are merged with this one.

By id, by module (in file order or as a seeded sample), the CI sample, the named ones.

Kept apart from `run.py` (which builds, installs and judges) so the choice can be read, and
changed, without the machinery that executes it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import catalog
import generate
import report
import selection
from model import Verdict

if TYPE_CHECKING:
    import argparse
    from pathlib import Path

    from model import Mutant


def pick(args: argparse.Namespace) -> list[catalog.Named]:
    """Return the named mutants to run: those of `--named`, or the whole catalog."""
    entries = catalog.load()
    if not args.named:
        return entries
    unknown = set(args.named) - {entry.name for entry in entries}
    if unknown:
        raise SystemExit(f"mutants: no named mutant {sorted(unknown)} in catalog.toml")
    return [entry for entry in entries if entry.name in set(args.named)]


def choose(
    args: argparse.Namespace, config: generate.Config, every: list[Mutant]
) -> tuple[list[Mutant], str]:
    """Return the mutants to run and a sentence saying which they are."""
    if args.named:
        return [], f"no generated mutant; named: {', '.join(args.named)}"
    total = f"{len(every)} generated"
    if args.id:
        chosen = [m for m in every if m.id in set(args.id)]
        return chosen, f"{len(chosen)} chosen by id of {total}"
    if args.goal_sample or args.per_module:
        return _sampled(args, config, every, total)
    if args.module:
        order = {name: position for position, name in enumerate(args.module)}
        chosen = sorted((m for m in every if m.module in order), key=lambda m: order[m.module])
        if args.limit:
            chosen = chosen[: args.limit]
        return chosen, f"the mutants of {', '.join(args.module)}: {len(chosen)} of {total}"
    if args.all:
        return every, f"every mutant: {total}"
    chosen = generate.sample(every, config)
    return chosen, f"the CI sample: {len(chosen)} of {total}"


def _sampled(
    args: argparse.Namespace, config: generate.Config, every: list[Mutant], total: str
) -> tuple[list[Mutant], str]:
    """Return a seeded-order sample: of the goal modules together, or of each `--module`."""
    if args.goal_sample:
        goal = sum(m.module in config.goal_modules for m in every)
        return goal_sample(args, every, config), (
            f"the next {args.goal_sample} of the goal modules' one seeded order (a uniform sample"
            f" of their {goal} mutants) of {total}"
        )
    if not args.module:
        raise SystemExit("mutants: --per-module needs --module")
    return per_module(args, every, config), (
        f"the next {args.per_module} of each of {', '.join(args.module)} in the seeded order"
        f" (a uniform sample) of {total}"
    )


def seeded_ids(config: generate.Config, every: list[Mutant]) -> dict[str, list[str]]:
    """Return module -> the ids of every mutant generated for it, in the seeded order."""
    modules = {m.module for m in every}
    return {
        module: [
            m.id for m in generate.seeded_order([m for m in every if m.module == module], config)
        ]
        for module in modules
    }


def goal_order(config: generate.Config, every: list[Mutant]) -> list[str]:
    """Return the ids of every goal module's mutant in one seeded order (the union's)."""
    return [
        m.id
        for m in generate.seeded_order(
            [m for m in every if m.module in config.goal_modules], config
        )
    ]


def _judged(args: argparse.Namespace) -> set[str]:
    """Return the ids with a row in a `--keep` record."""
    return {item["id"] for path in args.keep or [] for item in json.loads(path.read_text())["rows"]}


def goal_sample(
    args: argparse.Namespace, every: list[Mutant], config: generate.Config
) -> list[Mutant]:
    """Return the next `--goal-sample` mutants of the goal modules' one seeded order.

    The order is the one hash order the per-module samples restrict to a module, so the rows
    of earlier per-module runs (`--keep`) fill their places in it and are passed over here: the
    run fills the gaps of the longest prefix, which is a uniform sample of every goal mutant
    (the report's pooled lower bound).
    """
    judged = _judged(args)
    by_id = {m.id: m for m in every}
    return [by_id[i] for i in goal_order(config, every) if i not in judged][: args.goal_sample]


def per_module(
    args: argparse.Namespace, every: list[Mutant], config: generate.Config
) -> list[Mutant]:
    """Return, for each `--module`, its next `--per-module` mutants in the seeded order.

    Those already judged in a `--keep` record are passed over, so a module is sampled in
    growing prefixes of one uniform order across several runs (the report's lower bound needs
    a prefix with no gap). The modules take turns, so `--minutes` stops every one at a prefix.
    """
    judged = _judged(args)
    queues = [
        [m for m in generate.seeded_order([m for m in every if m.module == module], config)
         if m.id not in judged][: args.per_module]
        for module in args.module
    ]  # fmt: skip
    # Round-robin over the modules: a run stopped by --minutes leaves a prefix of each.
    return [
        queue[i]
        for i in range(max(map(len, queues), default=0))
        for queue in queues
        if i < len(queue)
    ]


def stale_ids(selected: dict[str, list[str]], named: list[catalog.Named]) -> list[str]:
    """Return the test ids to be run that no longer exist, printed loudly when there are any."""
    wanted = {t for tests in selected.values() for t in tests}
    wanted |= {t for entry in named for t in entry.tests}
    stale = selection.stale(sorted(wanted))
    if stale:
        print(
            f"mutants: the test map is stale: {len(stale)} selected test ids no longer exist"
            " (run `nox -s mutants -- --map-only` to map anew):\n  " + "\n  ".join(stale),
            flush=True,
        )
    return stale


def keep(
    earlier: list[Path], rows: list[report.Row], described: str, generated: set[str]
) -> tuple[list[report.Row], str, list[str]]:
    """Merge this run's rows into earlier runs' (their `--out` records), in the earlier order.

    For a long run done in parts, or the survivors of a run judged again once new tests exist:
    a mutant run now replaces its earlier row, the others are reported as they were, and the
    selection sentence says what each part was and against which commit it ran. The named
    mutants' rows of the last record that ran them come along (for a run that does not).
    """
    records = [json.loads(path.read_text()) for path in earlier]
    fresh = {row.id: row for row in rows}
    latest: dict[str, dict[str, Any]] = {}
    for record in records:  # a later record's verdict of a mutant replaces an earlier one's
        latest.update({item["id"]: item for item in record["rows"]})
    # A mutant whose line has changed since is not generated any more (its id names the line's
    # text): its old verdict says nothing about the code as it is, so it is left out, counted.
    gone = [mutant for mutant in latest if mutant not in generated and mutant not in fresh]
    kept = [
        report.Row(**{**item, "verdict": Verdict(item["verdict"])})
        for item in latest.values()
        if item["id"] not in fresh and item["id"] in generated
    ]
    order = {mutant: index for index, mutant in enumerate(latest)}
    merged = sorted([*kept, *rows], key=lambda row: order.get(row.id, len(order)))
    parts = "; ".join(f"{r['selection']} (against `{r['commit']}`)" for r in records)
    # A run that judged nothing (a report rewritten from the records alone) adds no part.
    sentence = (
        f"{parts}; then {described}, whose {len(rows)} verdicts replace the earlier ones"
        if rows
        else parts
    )
    if gone:
        sentence += (
            f"; {len(gone)} earlier rows left out, their mutated line having changed since"
            " (no such mutant is generated now)"
        )
    named: list[str] = next((r["named"] for r in reversed(records) if r.get("named")), [])
    return merged, sentence, named
