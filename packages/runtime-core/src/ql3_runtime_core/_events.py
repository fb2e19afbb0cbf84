"""One fact, one log record: a stable event name and its fields, never the fact written twice.

Every package logs through `log_event`: the record's message *is* the event name
(`commit.reply_lost`, `schedule.quarantined`), and every value travels once, as a field (`extra`).
Renderers decide how a record looks (cluster-control's text renderer prints `event key=value ...`,
its JSON renderer one object), so a person greps the same names a machine parses, and a value
never appears once in a sentence and again in a field. Records carry no time of the node: a time
worth logging is a database time, passed as a field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import logging

__all__ = ["EVENT_FIELD", "log_event"]

# The field that names the fact in every record `log_event` writes (and what tests look up).
EVENT_FIELD: Final = "event"


def log_event(
    logger: logging.Logger,
    level: int,
    event: str,
    /,
    *,
    exc_info: BaseException | None = None,
    **fields: object,
) -> None:
    """Log `event` at `level` with `fields`; nothing is built when the level is off.

    `event` is a dotted, stable name (`area.what_happened`); `fields` are its values (ids, counts,
    database times, reasons). `exc_info` attaches an exception (renderers show it in one line;
    tracebacks only at DEBUG).
    """
    if not logger.isEnabledFor(level):
        return
    logger.log(level, event, extra={EVENT_FIELD: event, **fields}, exc_info=exc_info, stacklevel=2)
