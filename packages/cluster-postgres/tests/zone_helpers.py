"""Two zone rules versions without downloading an old tzdata wheel (no fixtures here).

`2000a` is a made-up version: this node's rule data except that America/New_York holds
Asia/Tokyo's TZif bytes (13 to 14 hours apart), every other zone identical. `install_zone_rules`
makes a database look as if it had only ever recorded one version, as its owner; adopting the
node's real version then changes exactly one zone.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ql3_runtime_core import ZoneRules, load_timezone, wheel_zone_data
from repo_helpers import db_now_ms, owner_conn

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ql3_testkit import Ql3Database

MADE_UP = "2000a"
NEW_YORK = "America/New_York"
TOKYO = "Asia/Tokyo"


def made_up_data() -> dict[str, bytes]:
    """Return the made-up version's data: this node's, with New York's zone being Tokyo's."""
    data = wheel_zone_data()
    data[NEW_YORK] = data[TOKYO]
    return data


def made_up_rules() -> ZoneRules:
    """Return the made-up version's rules, built in memory (as a replica would load them)."""
    return ZoneRules.from_data(MADE_UP, made_up_data())


def install_zone_rules(db: Ql3Database, version: str, data: Mapping[str, bytes] | None) -> None:
    """Make the database look as if it had only ever recorded `version` (and stored `data`)."""
    with owner_conn(db) as conn, conn.transaction():
        if data is not None:
            zones = sorted(data)
            conn.execute(
                "INSERT INTO ql3.zone_rule_data (version, zone, tzif)"
                " SELECT %s, z, t FROM unnest(%s::text[], %s::bytea[]) AS u (z, t)",
                (version, zones, [data[zone] for zone in zones]),
            )
        conn.execute("DELETE FROM ql3.zone_rule_versions")
        conn.execute(
            "UPDATE ql3.zone_rules SET version = %s, recorded_at_ms ="
            " floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint,"
            " recorded_by = current_user",
            (version,),
        )
        conn.execute(
            "INSERT INTO ql3.zone_rule_versions (version, took_effect_at_ms, recorded_by)"
            " SELECT version, recorded_at_ms, recorded_by FROM ql3.zone_rules"
        )
        conn.execute("UPDATE ql3.schedule_revisions SET zone_rules_version = %s", (version,))


def tokyo_hours(db: Ql3Database) -> str:
    """Return Tokyo's current and next hour (database time) as a cron hour list.

    Under the made-up rules a New York schedule firing in these hours is due now; under the real
    rules New York is 13 or 14 hours behind, so none of them is near.
    """
    now = datetime.fromtimestamp(db_now_ms(db.dsn("admin")) / 1000, UTC)
    hour = now.astimezone(load_timezone(TOKYO)).hour
    return f"{hour},{(hour + 1) % 24}"
