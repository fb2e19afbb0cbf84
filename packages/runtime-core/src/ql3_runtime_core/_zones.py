"""Zone rules from one versioned source, never the node's files: `ZoneRules` and the wheel's rules.

`zoneinfo.ZoneInfo(name)` searches `PYTHONTZPATH`, the system's `/usr/share/zoneinfo` and only then
the `tzdata` package: a node whose files say New York is Tokyo would decide 14 hours apart from its
peers. Here a zone is only ever built from TZif bytes of one named version (`ZoneInfo.from_file`):

- `ZoneRules(version, read_zone)`: one version of zone rules whose TZif bytes come from
  `read_zone` (ql3-cluster-postgres reads them from the database, which stores the rules of every
  version it records, so that a replica decides with the recorded rules and a history can be
  judged by the rules that were in force). Each zone is built once, on first use.
- `wheel_zone_rules()`: the rules of the pinned `tzdata` wheel installed here, the default of
  every cron function when no rules are given; `load_timezone` reads one of its zones,
  `zone_rules_version()` names its version and `wheel_zone_data()` returns all of its bytes (what
  a node uploads when it records or adopts its version).

The process-wide search path is never touched.
"""

from __future__ import annotations

import functools
import threading
from importlib import metadata, resources
from io import BytesIO
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

import tzdata  # type: ignore[import-untyped]  # ships no type information; read as a resource

from ._errors import UnknownTimezoneError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = [
    "ZoneRules",
    "load_timezone",
    "wheel_zone_data",
    "wheel_zone_rules",
    "zone_rules_version",
]


class ZoneRules:
    """One version of zone rules: its name and the TZif bytes of each of its zones.

    `read_zone(name)` returns the bytes of zone `name` in this version, or None when the version
    has no such zone (`timezone` then raises `UnknownTimezoneError`). Each zone is read and built
    once and then kept, so one instance per version should be shared. Instances compare and hash
    by identity: the cron engine's caches are keyed by the rules object, and two objects of one
    version name (a test's made-up rules beside the real ones) must never share a cached answer.
    """

    __module__ = "ql3_runtime_core"

    def __init__(self, version: str, read_zone: Callable[[str], bytes | None]) -> None:
        self.version = version
        self._read_zone = read_zone
        self._zones: dict[str, ZoneInfo | None] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_data(cls, version: str, data: Mapping[str, bytes]) -> ZoneRules:
        """Build rules from every zone's bytes at once (tests, uploads already in memory)."""
        zones = dict(data)
        return cls(version, zones.get)

    def timezone(self, name: str) -> ZoneInfo:
        """Return zone `name` of this version, or raise `UnknownTimezoneError` naming it."""
        try:
            zone = self._zones[name]
        except KeyError:
            zone = self._build(name)
        if zone is None:
            raise UnknownTimezoneError(name, self.version)
        return zone

    def knows(self, name: str) -> bool:
        """Tell whether this version has a zone called `name`."""
        try:
            self.timezone(name)
        except UnknownTimezoneError:
            return False
        return True

    def _build(self, name: str) -> ZoneInfo | None:
        with self._lock:
            if name in self._zones:
                return self._zones[name]
            data = self._read_zone(name)
            # One instance per name and version: equal zones are then one object, and aware
            # datetimes of the same zone compare by wall time, as with ZoneInfo(name).
            zone = None if data is None else ZoneInfo.from_file(BytesIO(data), key=name)
            self._zones[name] = zone
            return zone

    def __repr__(self) -> str:
        return f"ZoneRules(version={self.version!r})"


def zone_rules_version() -> str:
    """Return the version of the `tzdata` wheel installed on this node (e.g. `2026.6`)."""
    return metadata.version("tzdata")


def load_timezone(name: str) -> ZoneInfo:
    """Return the IANA zone `name` from the `tzdata` wheel, or raise `UnknownTimezoneError`.

    Only the names tzdata lists in its `zones` file are zones: `localtime` and `posixrules`
    (node-relative), absolute paths and `..` are not among them and are refused.
    """
    if name not in _zone_names():
        raise UnknownTimezoneError(name)
    return wheel_zone_rules().timezone(name)


@functools.cache
def wheel_zone_rules() -> ZoneRules:
    """Return the rules of this node's `tzdata` wheel (one shared instance)."""
    return ZoneRules(zone_rules_version(), _wheel_zone_bytes)


def wheel_zone_data() -> dict[str, bytes]:
    """Return the TZif bytes of every zone of this node's `tzdata` wheel, by name."""
    data = {name: _wheel_zone_bytes(name) for name in sorted(_zone_names())}
    return {name: tzif for name, tzif in data.items() if tzif is not None}


def _wheel_zone_bytes(name: str) -> bytes | None:
    if name not in _zone_names():
        return None
    return resources.files(tzdata).joinpath("zoneinfo", *name.split("/")).read_bytes()


@functools.cache
def _zone_names() -> frozenset[str]:
    """Return the zone names of the `tzdata` wheel (its `zones` file, one name a line)."""
    text = resources.files(tzdata).joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())
