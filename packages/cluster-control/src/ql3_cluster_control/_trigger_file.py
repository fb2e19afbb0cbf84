"""Manual Runs a schedule file requests (`[[trigger]]` tables of `ql3 schedule apply FILE`).

A file is applied again and again (CI, GitOps), so a request in it must stay one Run however
often it is applied: each `[[trigger]]` names its schedule and a `request_id`, which is required
here (the CLI's `ql3 schedule trigger` generates one; a file that did so would run again on every
apply). The request id is the same idempotency key as the CLI's (DESIGN §7): the first apply
admits the Run, every later one finds it. The whole file is checked before any connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ql3_cluster_postgres import check_request_id, checked_payload
from ql3_runtime_core import InvalidArgumentError

from ._config import ConfigurationError
from ._file_tables import read_requests, request_table

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["TRIGGER_KEYS", "TriggerRequest", "load_trigger_requests"]

TRIGGER_KEYS = ("schedule", "request_id", "payload")


@dataclass(frozen=True)
class TriggerRequest:
    """One manual Run a file asks for: schedule name, request id, payload (None: template)."""

    schedule: str
    request_id: str
    payload: dict[str, Any] | None


def _request(where: str, given: object) -> TriggerRequest:
    entry = request_table(where, given, TRIGGER_KEYS, "trigger")
    payload = entry.get("payload")
    if payload is not None and not isinstance(payload, dict):
        raise ConfigurationError(f"{where}: payload={payload!r} must be a table (JSON object)")
    try:
        return TriggerRequest(
            schedule=entry["schedule"],
            request_id=check_request_id(entry["request_id"]),
            payload=checked_payload(payload),
        )
    except InvalidArgumentError as exc:
        raise ConfigurationError(f"{where}: {exc}") from exc


def load_trigger_requests(path: Path) -> list[TriggerRequest]:
    """Read the `[[trigger]]` tables of a schedule file, checked whole (no connection).

    Raises:
        ConfigurationError: unreadable file, bad syntax, unknown key, a missing or malformed
            request id, a payload that is not a table or is too large, a request id twice.

    """
    return read_requests(path, "trigger", _request)
