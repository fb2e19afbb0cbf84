"""EXPLAIN (ANALYZE, BUFFERS) of the replica's claim and commit statements at the profile's size.

A fresh clone of the profile's template, every cursor one minute back (all S schedules due),
the runtime login user with the repository's session settings (`enable_seqscan=off`,
`plan_cache_mode=force_generic_plan`, `jit=off`). The statements are QL3's shipped files, read
from the installed ql3-cluster-postgres, with parameters bound as the repository binds them:
the claim of one default batch (128) among S due rows, in a READ COMMITTED transaction rolled
back; then a real claim of one batch, and the fenced commit of that batch (one occurrence per
claim, cursor one period on, as the burst decides) in a SERIALIZABLE transaction rolled back.
Each plan is kept whole, with its execution time and the nodes with the most time of their own.
"""

from __future__ import annotations

import re
import uuid
from importlib import resources
from typing import TYPE_CHECKING, Any, LiteralString

from psycopg import IsolationLevel, sql

from ._baseline import BATCH, SESSION_OPTIONS
from ._sql import connect, load_sql

if TYPE_CHECKING:
    import psycopg
    from ql3_testkit import Ql3Database

    from ._common import BenchContext

__all__ = ["statement_plans"]

PERIOD_MS = 60_000
LEASE_MS = 30_000
_ACTUAL = re.compile(r"actual time=([\d.]+)\.\.([\d.]+) rows=\d+ loops=(\d+)")
_EXECUTION = re.compile(r"Execution Time: ([\d.]+) ms")


def _product_sql(name: str) -> LiteralString:
    """Read one of ql3-cluster-postgres' shipped statements (the text the repository sends)."""
    # LiteralString by construction: a reviewed file shipped in the product's wheel.
    return resources.files("ql3_cluster_postgres").joinpath("sql", f"{name}.sql").read_text()


def _explain(
    conn: psycopg.Connection[dict[str, Any]], name: str, params: dict[str, Any]
) -> dict[str, Any]:
    """Run the statement under EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back."""
    query = sql.SQL(load_sql("profile_explain")).format(statement=sql.SQL(_product_sql(name)))
    with conn.transaction(force_rollback=True):
        lines = [str(row["QUERY PLAN"]) for row in conn.execute(query, params).fetchall()]
    return {"statement": name, "execution_ms": _execution_ms(lines), **_top_nodes(lines)}


def _execution_ms(lines: list[str]) -> float | None:
    for line in lines:
        found = _EXECUTION.search(line)
        if found:
            return float(found.group(1))
    return None


def _top_nodes(lines: list[str]) -> dict[str, Any]:
    """Return the plan and its nodes with the most time of their own (children subtracted).

    A node's time is its end time x loops; its own time is that minus its direct children's
    (found by indentation). A `CTE Scan` is left out of the ranking: its time is the CTE's
    plan, which it runs, and which is ranked under its own nodes.
    """
    nodes: list[tuple[int, float, str]] = []  # (indent, total ms, line)
    own: list[float] = []
    stack: list[int] = []
    for line in lines:
        found = _ACTUAL.search(line)
        if not found:
            continue
        indent = line.index("->") if "->" in line else 0
        total = float(found.group(2)) * int(found.group(3))
        while stack and nodes[stack[-1]][0] >= indent:
            stack.pop()
        if stack:
            own[stack[-1]] -= total
        nodes.append((indent, total, line.strip().removeprefix("->").strip()))
        own.append(total)
        stack.append(len(nodes) - 1)
    ranked = sorted(
        (
            (round(own[index], 3), text.split("  (cost=")[0])
            for index, (_, _, text) in enumerate(nodes)
            if not text.startswith("CTE Scan")
        ),
        reverse=True,
    )
    return {
        "top_nodes": [{"own_ms": ms, "node": text} for ms, text in ranked[:4]],
        "plan": lines,
    }


def _claim_params(version: str) -> dict[str, Any]:
    return {
        "owner_id": "profile-plans",
        "claim_token": uuid.uuid4(),
        "lease_ms": LEASE_MS,
        "batch_limit": BATCH,
        "zone_rules_version": version,
    }


def _commit_params(rows: list[dict[str, Any]], version: str) -> dict[str, Any]:
    """Return the fenced commit of claimed `rows`: each admits its cursor, moves one period on."""
    claimed = [row for row in rows if row["schedule_id"] is not None]
    ids = [row["schedule_id"] for row in claimed]
    return {
        "schedule_ids": ids,
        "row_ctids": [row["ctid"] for row in claimed],
        "owner_ids": [row["owner_id"] for row in claimed],
        "claim_tokens": [row["claim_token"] for row in claimed],
        "versions": [row["version"] for row in claimed],
        "acquired_ms": [row["claim_acquired_at_ms"] for row in claimed],
        "expires_ms": [row["claim_expires_at_ms"] for row in claimed],
        "next_due_ms": [row["next_due_at_ms"] + PERIOD_MS for row in claimed],
        "states": ["active"] * len(claimed),
        "zone_rules_version": version,
        "occurrence_schedule_ids": ids,
        "occurrence_ms": [row["next_due_at_ms"] for row in claimed],
        "skip_schedule_ids": [],
        "skip_first_ms": [],
        "skip_last_ms": [],
        "skip_counts": [],
        "skip_policies": [],
    }


def statement_plans(ctx: BenchContext, template: Ql3Database) -> list[dict[str, Any]]:
    """Return the claim's and the commit's EXPLAIN (ANALYZE, BUFFERS), all schedules due."""
    db = ctx.database("profile_plans", template=template.name)
    try:
        with connect(db.superuser_dsn) as su:
            su.execute(load_sql("profile_set_all_due"))
            su.execute(load_sql("analyze"))
        options = f"{SESSION_OPTIONS} -c jit=off"
        with connect(db.dsn("runtime"), application_name="profile-plans", options=options) as conn:
            row = conn.execute(load_sql("profile_zone_rules_version")).fetchone()
            version = str(row["zone_rules_version"]) if row else ""
            claim = _explain(conn, "claim_due_schedules", _claim_params(version))
            # A real claim (autocommit) so that the commit has exact claims to fence on.
            rows = conn.execute(_product_sql("claim_due_schedules"), _claim_params(version))
            commit_params = _commit_params(rows.fetchall(), version)
            conn.isolation_level = IsolationLevel.SERIALIZABLE  # applies to transaction() blocks
            commit = _explain(conn, "commit_decisions", commit_params)
            commit["claims"] = len(commit_params["schedule_ids"])
    finally:
        ctx.drop(db)
    return [claim, commit]
