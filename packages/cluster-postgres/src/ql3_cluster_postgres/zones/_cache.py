"""The zone rules one replica decides with: the recorded version, loaded from the database.

A replica never decides with its node's tzdata (rule zero for zones). It claims with the version
it has loaded; the claim statement compares that with the recorded one and claims nothing when
they differ, and the replica then loads the recorded version (if the database holds its data) and
claims again, so an adopt is followed at once and without a restart. Zones are read lazily: the
zones of each claim round's rows are fetched (one statement for those not yet known) before any
decision uses them, and kept per (version, zone); a decision therefore never waits on the
database, and one that did would quarantine its schedule for a fault that is not its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from ql3_runtime_core import ZoneRules, ZoneRulesCheck

from ql3_cluster_postgres._rows import named_row

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from psycopg.rows import RowFactory

    Run = Callable[[str, Mapping[str, Any], RowFactory[Any], str], list[Any]]

__all__ = ["ReplicaZoneRules"]


class _Zones(NamedTuple):
    zones: int


class _ZoneBytes(NamedTuple):
    zone: str
    tzif: bytes


_ZONES = named_row(_Zones)
_ZONE_BYTES = named_row(_ZoneBytes)


class ReplicaZoneRules:
    """The loaded version, its rules and the zone data read so far (the repository's lock held).

    Args:
        run: the repository's one-statement runner (name, params, row factory, action).

    """

    def __init__(self, run: Run) -> None:
        self._run = run
        self._loaded: str | None = None
        # version -> zone -> TZif bytes (None: the version has no such zone).
        self._data: dict[str, dict[str, bytes | None]] = {}
        self._rules: dict[str, ZoneRules] = {}
        self._problem: str | None = None

    @property
    def loaded(self) -> str | None:
        """The version this replica decides with (None before one was loaded)."""
        return self._loaded

    @property
    def rules(self) -> ZoneRules | None:
        """The loaded version's rules."""
        return None if self._loaded is None else self._rules[self._loaded]

    def check(self, recorded: str | None) -> ZoneRulesCheck:
        """Compare the loaded version with `recorded`, after trying to load `recorded`."""
        if recorded != self._loaded:
            self._follow(recorded)
        problem = None if recorded is not None and recorded == self._loaded else self._problem
        return ZoneRulesCheck(
            local_version=self._loaded, recorded_version=recorded, problem=problem
        )

    def _follow(self, recorded: str | None) -> None:
        if recorded is None:
            self._problem = "no zone rules version is recorded (run `ql3 migrate`)"
            return
        (row,) = self._run(
            "count_zone_rule_data", {"version": recorded}, _ZONES, "repository: zone rules"
        )
        if row.zones == 0:
            self._problem = (
                f"the database holds no rule data for tzdata {recorded} (run `ql3 zone-rules"
                " adopt` from a node with that version or the one to switch to)"
            )
            return
        self._problem = None
        self._loaded = recorded
        if recorded not in self._rules:
            self._data[recorded] = {}
            self._rules[recorded] = ZoneRules(recorded, lambda name: self._zone(recorded, name))

    def preload(self, zones: Iterable[str]) -> None:
        """Read the loaded version's zones among `zones` that were never read (one statement)."""
        version = self._loaded
        if version is None:
            return
        data = self._data[version]
        wanted = sorted({zone for zone in zones if zone not in data})
        if wanted:
            self._read(version, wanted)

    def _read(self, version: str, zones: list[str]) -> None:
        rows = self._run(
            "read_zone_rule_data",
            {"version": version, "zones": zones},
            _ZONE_BYTES,
            "repository: read zone rules",
        )
        data = self._data[version]
        found = {row.zone: bytes(row.tzif) for row in rows}
        for zone in zones:
            data[zone] = found.get(zone)

    def _zone(self, version: str, name: str) -> bytes | None:
        # Every claimed zone was preloaded; a zone asked otherwise (a caller deciding a claim of
        # its own making) is read now.
        data = self._data[version]
        if name not in data:
            self._read(version, [name])
        return data.get(name)
