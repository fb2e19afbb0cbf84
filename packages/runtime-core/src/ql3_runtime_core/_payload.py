"""A task's payload as the text a command receives, bounded so that every attempt can start.

A command gets its payload in the environment (`QL3_TASK_PAYLOAD`). Linux refuses to start a
program one of whose environment strings is longer than `MAX_ARG_STRLEN` (32 pages: 131 072
bytes, the variable's name included): `execve` fails with E2BIG and every attempt of every run
would fail the same way. So a payload is refused when it is written (admin time), not when it
runs: its compact JSON may hold at most `PAYLOAD_MAX_BYTES`, half that limit, which also leaves
room in the whole environment (`ARG_MAX`, 2 MiB at least) for everything else a command
inherits.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

from ._errors import InvalidArgumentError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["PAYLOAD_MAX_BYTES", "payload_text"]

PAYLOAD_MAX_BYTES: Final = 65_536


def payload_text(payload: Mapping[str, Any], *, field: str = "payload") -> str:
    """Return `payload` as compact JSON with sorted keys, the text a command receives.

    Raises:
        InvalidArgumentError: naming `field`, when the payload is not a JSON object or its text
            exceeds `PAYLOAD_MAX_BYTES` UTF-8 bytes (the size, not the payload, is quoted).

    """
    try:
        text = json.dumps(dict(payload), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(field, type(payload).__name__, f"must be JSON: {exc}") from exc
    size = len(text.encode("utf-8"))
    if size > PAYLOAD_MAX_BYTES:
        requirement = (
            f"at most {PAYLOAD_MAX_BYTES} bytes of compact JSON (a command receives it in its"
            " environment, whose strings the kernel caps at 128 KiB)"
        )
        raise InvalidArgumentError(field, f"{size} bytes", requirement)
    return text
