"""A schedule definition as stored: its six columns, rebuilt (and validated once) from a row.

Schedules and revisions store a definition in the same six columns; the repository, the admin,
the zone rules adopt and verify all rebuild it from them. It lives below all of them so none has
to import another's room for it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NamedTuple

from ql3_runtime_core import (
    MisfirePolicy,
    ScheduleDefinition,
    load_timezone,
    validate_cron_expression,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["DefinitionColumns", "checked_definition", "definition_from_columns"]


class DefinitionColumns(NamedTuple):
    """The six columns that store a definition (schedules and revisions), by name.

    A tuple, so a definition read from a row can key a cache (`checked_definition`).
    """

    cron: str
    timezone: str
    misfire_policy: str
    misfire_grace_ms: int
    start_at_ms: int | None
    end_at_ms: int | None

    @classmethod
    def of(cls, row: Mapping[str, Any]) -> DefinitionColumns:
        """Take the definition columns of a row read by name (a dict row)."""
        return cls(**{name: row[name] for name in cls._fields})


def definition_from_columns(fields: tuple[Any, ...]) -> ScheduleDefinition:
    """Build a definition from its columns (`DefinitionColumns`, or a tuple in that order)."""
    columns = DefinitionColumns(*fields)
    return ScheduleDefinition(
        cron=columns.cron,
        timezone=columns.timezone,
        misfire_policy=MisfirePolicy(columns.misfire_policy),
        misfire_grace_ms=columns.misfire_grace_ms,
        start_at_ms=columns.start_at_ms,
        end_at_ms=columns.end_at_ms,
    )


@functools.lru_cache(maxsize=4096)
def checked_definition(columns: DefinitionColumns) -> ScheduleDefinition:
    """Validate one distinct definition once; cron parsing dominates bulk applies otherwise."""
    validate_cron_expression(columns.cron)
    load_timezone(columns.timezone)
    return definition_from_columns(columns)
