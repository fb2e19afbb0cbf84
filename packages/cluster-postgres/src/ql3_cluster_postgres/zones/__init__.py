"""The zones room: the database as the zone rules authority (DESIGN §9).

Owns the recorded zone rules version and its history, every version's stored rule data (read,
record, load), the adopt that switches versions and moves what changed, and the per-replica
cache the repository claims with.

May import: the package's base modules only. The rooms above it (`admin`, `verify`,
`repository`) read zone rules from here; nothing here imports them.

What other rooms and the package's `__init__` use is re-exported here: the modules stay
private to the room (import-linter's `private_modules`).
"""

from __future__ import annotations

from ._adopt import adopt_zone_rules
from ._cache import ReplicaZoneRules
from ._moves import ZoneMove
from ._rules import (
    ZoneRulesChange,
    ZoneRulesRecord,
    ZoneRuleVersion,
    connection_zone_rules,
    load_recorded_zone_rules,
    read_zone_rule_history,
    read_zone_rules,
    record_zone_rules,
    stored_zone_count,
)

__all__ = [
    "ReplicaZoneRules",
    "ZoneMove",
    "ZoneRuleVersion",
    "ZoneRulesChange",
    "ZoneRulesRecord",
    "adopt_zone_rules",
    "connection_zone_rules",
    "load_recorded_zone_rules",
    "read_zone_rule_history",
    "read_zone_rules",
    "record_zone_rules",
    "stored_zone_count",
]
