"""Zone rules from one versioned source: the pinned `tzdata` wheel, never the node's files.

`zoneinfo.ZoneInfo(name)` searches `PYTHONTZPATH`, the system's `/usr/share/zoneinfo` and only then
the `tzdata` package: a node whose files say New York is Tokyo would decide 14 hours apart from its
peers. Here every zone is read from the resource inside the `tzdata` wheel (`ZoneInfo.from_file`),
so every replica that runs the same `tzdata` version (`zone_rules_version()`, recorded in the
database) uses the same rules. The process-wide search path is never touched.
"""

from __future__ import annotations

import functools
from importlib import metadata, resources
from zoneinfo import ZoneInfo

import tzdata  # type: ignore[import-untyped]  # ships no type information; read as a resource

from ._errors import UnknownTimezoneError

__all__ = ["load_timezone", "zone_rules_version"]


def zone_rules_version() -> str:
    """Return the version of the `tzdata` wheel every zone is read from (e.g. `2026.6`)."""
    return metadata.version("tzdata")


def load_timezone(name: str) -> ZoneInfo:
    """Return the IANA zone `name` from the `tzdata` wheel, or raise `UnknownTimezoneError`.

    Only the names tzdata lists in its `zones` file are zones: `localtime` and `posixrules`
    (node-relative), absolute paths and `..` are not among them and are refused.
    """
    return _load_timezone(name)


@functools.lru_cache(maxsize=1_024)
def _load_timezone(name: str) -> ZoneInfo:
    # One instance per name: ZoneInfo.from_file does not cache, and equal zones should be one
    # object (aware datetimes of the same zone then compare by wall time, like ZoneInfo(name)).
    if name not in _zone_names():
        raise UnknownTimezoneError(name)
    resource = resources.files(tzdata).joinpath("zoneinfo", *name.split("/"))
    with resource.open("rb") as data:
        return ZoneInfo.from_file(data, key=name)


@functools.cache
def _zone_names() -> frozenset[str]:
    """Return the zone names of the `tzdata` wheel (its `zones` file, one name a line)."""
    text = resources.files(tzdata).joinpath("zones").read_text(encoding="utf-8")
    return frozenset(line.strip() for line in text.splitlines() if line.strip())
