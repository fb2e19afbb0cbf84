"""Log rendering: `text` (`event key=value ...`) or `json` (python-json-logger).

Records are written by `ql3_runtime_core.log_event`: the message is the event name and every value
travels once, as a field; the text renderer therefore prints the event once, not again as
`event=`. Records of other libraries (the driver's) keep their own message. Only the
verbs `ql3 run`, `ql3 worker` and `ql3 demo` call `configure_logging`; library code just logs.
Records carry no node timestamp on purpose: every time worth showing is a database time in the
record's own fields (rule zero).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

from pythonjsonlogger.json import JsonFormatter
from ql3_cluster_postgres import DRIVER_LOGGER
from ql3_runtime_core import EVENT_FIELD

from ._config import LogFormat

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["OwnerFilter", "TextFormatter", "configure_logging", "record_fields"]

_HANDLER_NAME = "ql3"
# The attributes every LogRecord has (read off a blank one, so a Python upgrade that adds one
# is covered): whatever else a record carries came from `extra=` and is a field to render.
_RESERVED = frozenset(
    vars(logging.LogRecord("", 0, "", 0, "", None, None)).keys() | {"message", "asctime"}
)


def record_fields(record: logging.LogRecord) -> Iterator[tuple[str, Any]]:
    """Yield the `extra` fields of a record, in the order they were given."""
    for key, value in vars(record).items():
        if key not in _RESERVED and not key.startswith("_"):
            yield key, value


class OwnerFilter(logging.Filter):
    """Stamp every record with the replica's owner id so logs of several replicas can be merged."""

    def __init__(self, owner_id: str) -> None:
        super().__init__()
        self.owner_id = owner_id

    def filter(self, record: logging.LogRecord) -> bool:
        # A record that names an owner itself (a demo logging for a replica) keeps it.
        if not hasattr(record, "owner_id"):
            record.owner_id = self.owner_id
        return True


def _text_value(value: object) -> str:
    # Bare when the value cannot be misread as two fields; JSON-quoted otherwise, so a message
    # with spaces or `=` in it still splits back into key=value pairs unambiguously.
    if isinstance(value, str) and value and " " not in value and "=" not in value:
        return value
    return json.dumps(value, default=str)


class TextFormatter(logging.Formatter):
    """`LEVEL logger: event key=value ...`, readable by people and by `grep`."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        fields = " ".join(
            f"{key}={_text_value(value)}"
            for key, value in record_fields(record)
            if not (key == EVENT_FIELD and value == message)
        )
        line = f"{record.levelname} {record.name}: {message}"
        if fields:
            line = f"{line} {fields}"
        if record.exc_info:
            # A one-line summary of the cause; tracebacks only at DEBUG.
            exc = record.exc_info[1]
            line = f"{line} error={_text_value(f'{type(exc).__name__}: {exc}')}"
        return line


def _json_formatter() -> logging.Formatter:
    return JsonFormatter(
        "%(levelname)s %(name)s %(message)s",
        rename_fields={"levelname": "level", "name": "logger"},
        json_default=str,
    )


def configure_logging(
    log_format: LogFormat,
    *,
    level: str = "INFO",
    owner_id: str | None = None,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install one handler on the root logger rendering `log_format`; returns the handler."""
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setFormatter(TextFormatter() if log_format is LogFormat.TEXT else _json_formatter())
    if owner_id is not None:
        handler.addFilter(OwnerFilter(owner_id))
    root = logging.getLogger()
    # Replace our own handler (called again, say by a test), never anyone else's.
    for existing in list(root.handlers):
        if existing.get_name() == _HANDLER_NAME:
            root.removeHandler(existing)
    handler.set_name(_HANDLER_NAME)
    root.addHandler(handler)
    root.setLevel(level)
    # The database driver is chatty at INFO about reconnects we already report as WARNING.
    logging.getLogger(DRIVER_LOGGER).setLevel(max(logging.WARNING, root.level))
    return handler
