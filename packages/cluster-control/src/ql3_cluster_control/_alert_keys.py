"""The alert keys of a schedule (schedule files and `ql3 schedule add`), read one way.

`alert_on` is a comma-separated list (or, in a file, a list) of `missed`, `late`, `failed`,
`paused`; `alert_command` a shell command run like a task with `QL3_ALERT_*` variables;
`alert_webhook` an http(s) URL that receives a JSON POST; `alert_deadline` how long after its
scheduled time a Run must have succeeded, or `late` is recorded: a duration (`90s`, `15m`, `2h`,
`1d`) or whole milliseconds. A channel without `alert_on`, or `alert_on` whose `late` has no
deadline, is refused: a setting that can never alert is a mistake, not a plan.
"""

from __future__ import annotations

import re
from typing import Final

from pydantic import ValidationError
from ql3_cluster_postgres import ALERT_KINDS, AlertSettings

from ._config import ConfigurationError

__all__ = ["ALERT_KEYS", "alert_settings", "entry_alerts"]

ALERT_KEYS: Final = ("alert_on", "alert_command", "alert_webhook", "alert_deadline")
_DURATION: Final = re.compile(r"([1-9][0-9]{0,8})(s|m|h|d)")
_UNIT_MS: Final = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def _kinds(value: object, field: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items: list[object] = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, list):
        items = list(value)
    else:
        msg = f"{field}: a list of kinds ({', '.join(ALERT_KINDS)}), got {value!r}"
        raise ConfigurationError(msg)
    for item in items:
        if item not in ALERT_KINDS:
            msg = f"{field}: unknown kind {item!r} (allowed: {', '.join(ALERT_KINDS)})"
            raise ConfigurationError(msg)
    return tuple(str(item) for item in items)


def _deadline_ms(value: object, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        match = _DURATION.fullmatch(value.strip())
        if match is not None:
            return int(match[1]) * _UNIT_MS[match[2]]
    msg = f"{field}: a duration like 90s, 15m, 2h, 1d (or whole milliseconds), got {value!r}"
    raise ConfigurationError(msg)


def alert_settings(
    alert_on: object,
    command: object,
    webhook: object,
    deadline: object,
    *,
    fields: tuple[str, str, str, str] = ALERT_KEYS,
) -> AlertSettings | None:
    """Build the settings from the four keys (None when none is given); refuse naming the key."""
    if alert_on is None and command is None and webhook is None and deadline is None:
        return None
    on_field, command_field, webhook_field, deadline_field = fields
    if alert_on is None:
        msg = f"{on_field}: required with {command_field}, {webhook_field} or {deadline_field}"
        raise ConfigurationError(msg)
    for field, value in ((command_field, command), (webhook_field, webhook)):
        if value is not None and not isinstance(value, str):
            raise ConfigurationError(f"{field}: a string, got {value!r}")
    kinds = _kinds(alert_on, on_field)
    deadline_ms = _deadline_ms(deadline, deadline_field)
    if "late" in kinds and deadline_ms is None:
        msg = f"{deadline_field}: `late` needs a deadline (how long after the scheduled time)"
        raise ConfigurationError(msg)
    try:
        return AlertSettings.model_validate(
            {
                "alert_on": kinds,
                "command": command,
                "webhook": webhook,
                "deadline_ms": deadline_ms,
            }
        )
    except ValidationError as exc:
        error = exc.errors()[0]
        names = {"alert_on": on_field, "command": command_field, "webhook": webhook_field,
                 "deadline_ms": deadline_field}  # fmt: skip
        field = names.get(str(error["loc"][-1]), "") if error["loc"] else ""
        detail = error["msg"].removeprefix("Value error, ")
        raise ConfigurationError(f"{field}: {detail}" if field else detail) from exc


def entry_alerts(entry: dict[str, object]) -> AlertSettings | None:
    """Read the alert keys of one schedule file entry."""
    return alert_settings(*(entry.get(key) for key in ALERT_KEYS))
