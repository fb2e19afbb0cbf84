"""The zone rules `verify_history` judges with: each revision by the version it was computed with.

A history decided under several zone rules versions can only be judged with each of them: the
database stores every recorded version's rule data and the history of versions with the instant
each took effect (migrations/0006), and every revision names the version its occurrences are
computed with. `VerifyZones` loads those rules from the snapshot being verified (each zone on
first use), never from this node's tzdata, and knows the switches: which version followed which,
and when. A revision whose version's data is not stored cannot be judged (a `revision` finding);
a database whose recorded version has no data stored cannot be verified at all
(`ZoneRulesUnavailableError`, before any rule runs).

`check_zone_skip` judges a skip record of reason `zone_rules_changed`: it names the revision's
version as the old rules and the version that followed it at a switch no earlier than its last
occurrence, its range begins and ends on occurrences of the old rules and its count is exact,
and it is the last thing its revision's range holds (the switch ended that range).
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from psycopg.rows import class_row
from ql3_runtime_core import count_occurrences_ms, next_occurrence_ms, zone_rules_version

from ql3_cluster_postgres._errors import ZoneRulesUnavailableError
from ql3_cluster_postgres._send import send
from ql3_cluster_postgres.zones import (
    ZoneRuleVersion,
    connection_zone_rules,
    stored_zone_count,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import psycopg
    from ql3_runtime_core import ScheduleDefinition, ZoneRules

    from ._records import Skip

__all__ = ["ZONE_RULES_CHANGED", "VerifyZones", "version_for", "zone_skip_problems"]

ZONE_RULES_CHANGED = "zone_rules_changed"


class VerifyZones:
    """The stored rules of every version in one verify's snapshot, and the switches between them.

    Raises (when built):
        ZoneRulesUnavailableError: no version is recorded, or the recorded one has no stored data.

    """

    def __init__(
        self, connection: Callable[[], psycopg.Connection[Any]], recorded: str | None
    ) -> None:
        history = send(
            connection(), "read_zone_rule_history", rows=class_row(ZoneRuleVersion)
        ).fetchall()
        stored = {row.version for row in history if row.zones > 0}
        if recorded is not None and stored_zone_count(connection(), recorded) > 0:
            stored.add(recorded)  # recorded past the history (by hand): its data still counts
        if recorded is None or recorded not in stored:
            raise ZoneRulesUnavailableError(recorded, zone_rules_version(), "verify_history")
        self.recorded = recorded
        self.history = history
        self._rules = {version: connection_zone_rules(connection, version) for version in stored}
        self._starts = [row.took_effect_at_ms for row in history]
        # (old, new) -> the instants at which `new` followed `old`.
        self.switches: dict[tuple[str, str], list[int]] = {}
        for before, after in pairwise(history):
            key = (before.version, after.version)
            self.switches.setdefault(key, []).append(after.took_effect_at_ms)

    def rules(self, version: str | None) -> ZoneRules | None:
        """Return a version's stored rules (None: its data is not stored)."""
        return None if version is None else self._rules.get(version)

    def version_at(self, at_ms: int) -> str:
        """Return the version in force at `at_ms` (the first one for an earlier instant)."""
        if not self.history:
            return self.recorded
        index = max(bisect_right(self._starts, at_ms) - 1, 0)
        return self.history[index].version

    def recorded_rules(self) -> ZoneRules:
        """Return the rules recorded now (their data is stored: checked when built)."""
        return self._rules[self.recorded]


def zone_skip_problems(
    skip: Skip,
    definition: ScheduleDefinition,
    rules: ZoneRules,
    *,
    revision_version: str | None,
    window_high: int,
    switches: dict[tuple[str, str], list[int]],
) -> list[str]:
    """Return what is wrong with a `zone_rules_changed` skip record, judged in its revision."""
    first, last = skip.first_skipped_ms, skip.last_skipped_ms
    old, new = skip.zone_rules_from, skip.zone_rules_to
    problems: list[str] = []
    if old != revision_version:
        problems.append(
            f"names tzdata {old} as the rules it was due under, its revision was computed with"
            f" {revision_version}"
        )
    instants = switches.get((old or "", new or ""), [])
    if not any(last <= at <= skip.created_at_ms for at in instants):
        problems.append(
            f"names a switch from tzdata {old} to {new} that the version history does not hold"
            f" between its last occurrence {last} and its record at {skip.created_at_ms}"
        )
    cron, zone = definition.cron, definition.timezone

    def is_occurrence(at_ms: int) -> bool:
        return next_occurrence_ms(cron, zone, at_ms - 1, rules=rules) == at_ms

    if not (is_occurrence(first) and is_occurrence(last)):
        problems.append(f"does not begin and end on occurrences of tzdata {old}")
        return problems
    exact = count_occurrences_ms(cron, zone, first, last, rules=rules)
    if exact != skip.skipped_count:
        problems.append(f"counts {skip.skipped_count} occurrences, its range holds {exact}")
    following = next_occurrence_ms(cron, zone, last, rules=rules)
    if following < window_high:
        problems.append(
            f"is followed by occurrence {following} inside its revision's range: a switch of"
            " zone rules ends that range"
        )
    return problems


def version_for(zones: VerifyZones, version: str | None, created_at_ms: int) -> str:
    """Return a revision's version: its own, or (older rows without one) the one then in force."""
    return version if version is not None else zones.version_at(created_at_ms)
