"""docs/prometheus/ql3-alerts.yml names only metrics QL3 exports, and covers what operators need.

The rules file is loaded (a strict reader of the block YAML it is written in: mappings, lists,
plain and quoted scalars; anything else fails the test), each rule's PromQL is reduced to the
metric names it selects, and every name must be a sample a fresh `CoordinatorMetrics` or
`WorkerMetrics` registry exposes (or Prometheus's own `up`). A renamed metric, or a rule that
names one QL3 never exported, fails here rather than silently never firing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ql3_cluster_control import CoordinatorMetrics, WorkerMetrics

_RULES = Path(__file__).resolve().parents[4] / "docs" / "prometheus" / "ql3-alerts.yml"
# PromQL words that are not metric names.
_PROMQL = frozenset({
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "histogram_quantile",
    "and", "or", "unless", "by", "without", "on", "ignoring", "bool", "offset", "absent",
})  # fmt: skip
_PROMETHEUS_OWN = frozenset({"up"})


def _scalar(text: str) -> Any:
    if text.startswith('"'):
        return json.loads(text)
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return text


def _lines(text: str) -> list[tuple[int, str]]:
    out = []
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        assert "\t" not in raw, f"tab in YAML: {raw!r}"
        out.append((len(raw) - len(raw.lstrip(" ")), stripped))
    return out


def _block(lines: list[tuple[int, str]], at: int, indent: int) -> tuple[Any, int]:
    """Read the mapping or list starting at line `at`, indented `indent`; return it and the next."""
    if lines[at][1].startswith("- "):
        items: list[Any] = []
        while at < len(lines) and lines[at][0] == indent and lines[at][1].startswith("- "):
            # A list item is a mapping whose first key shares the dash's line.
            lines[at] = (indent + 2, lines[at][1][2:])
            item, at = _block(lines, at, indent + 2)
            items.append(item)
        return items, at
    mapping: dict[str, Any] = {}
    while at < len(lines) and lines[at][0] == indent and not lines[at][1].startswith("- "):
        key, sep, rest = lines[at][1].partition(":")
        assert sep, f"not a mapping entry: {lines[at][1]!r}"
        assert key not in mapping, f"duplicate key {key!r}"
        rest = rest.strip()
        at += 1
        if rest:
            mapping[key] = _scalar(rest)
        else:
            assert at < len(lines), f"{key!r} has no value"
            assert lines[at][0] >= indent, f"{key!r} has no value"
            mapping[key], at = _block(lines, at, lines[at][0])
    return mapping, at


def load_rules() -> dict[str, Any]:
    """Load the rules file; fail on anything the reader does not understand."""
    lines = _lines(_RULES.read_text(encoding="utf-8"))
    document, end = _block(lines, 0, 0)
    assert end == len(lines), f"unread YAML from line {lines[end]!r}"
    assert isinstance(document, dict)
    return document


def metric_names(expr: str) -> set[str]:
    """Return the metric names a PromQL expression selects (matchers and grouping dropped)."""
    expr = re.sub(r"\{[^}]*\}", "", expr)
    expr = re.sub(r"\[[^\]]*\]", "", expr)
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)
    names = set(re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", expr))
    return {name for name in names if name not in _PROMQL}


def exported() -> set[str]:
    """Every sample name a fresh coordinator's and worker's registries expose."""
    names: set[str] = set()
    for registry in (CoordinatorMetrics().registry, WorkerMetrics().registry):
        for family in registry.collect():
            names.update(sample.name for sample in family.samples)
    return names


def test_every_metric_a_rule_names_is_exported() -> None:
    """Each rule's expression names only QL3's exported samples (or `up`)."""
    rules = [rule for group in load_rules()["groups"] for rule in group["rules"]]
    known = exported() | _PROMETHEUS_OWN
    named: set[str] = set()
    for rule in rules:
        names = metric_names(rule["expr"])
        assert names, f"{rule['alert']}: names no metric"
        assert names <= known, f"{rule['alert']}: not exported: {sorted(names - known)}"
        named |= names
    # What operators were promised rules for: replica down, no admissions, overdue schedules,
    # worker queue age, alerts failing (and recorded).
    assert {
        "up",
        "ql3_admissions_total",
        "ql3_schedules_overdue",
        "ql3_attempt_queue_delay_seconds_bucket",
        "ql3_alert_delivery_failures_total",
        "ql3_alerts_total",
    } <= named


def test_the_reader_and_the_name_filter_can_fail() -> None:
    """A misspelt metric is caught, and the alert kinds are series from the start."""
    assert metric_names('sum(rate(ql3_admission_total{job="x"}[5m])) by (le)') == {
        "ql3_admission_total"
    }
    assert "ql3_admission_total" not in exported()
    samples = {
        (sample.name, sample.labels.get("kind"))
        for family in WorkerMetrics().registry.collect()
        for sample in family.samples
        if sample.name == "ql3_alerts_total"
    }
    assert samples == {
        ("ql3_alerts_total", kind) for kind in ("missed", "late", "failed", "paused")
    }
