"""How one alert is delivered: a command run like a task, and/or a JSON POST to a webhook.

Both carry the alert id as idempotency key (`QL3_ALERT_ID` in the command's environment, the
`Idempotency-Key` header of the POST): delivery is at least once (a retry after a lost answer,
a worker that died mid-delivery), so the receiver deduplicates on it. A command runs with
`/bin/sh -c` in its own process group, like a command task, and the whole group is killed at its
timeout. The webhook uses the standard library (`urllib.request`): QL3 has no HTTP client
dependency and one JSON POST does not justify one. A 2xx answer is delivered; anything else
(another status, a refused connection, a timeout) is a failed attempt, retried by the database's
backoff. Every instant in the body is a database time (rule zero).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ql3_cluster_postgres import TakenAlert

__all__ = [
    "ALERT_COMMAND_TIMEOUT_S",
    "ALERT_WEBHOOK_TIMEOUT_S",
    "alert_body",
    "alert_environment",
    "deliver_alert",
]

# Both fit in one delivery lease (60 s) with room to record the outcome.
ALERT_COMMAND_TIMEOUT_S: Final = 30.0
ALERT_WEBHOOK_TIMEOUT_S: Final = 10.0
_SHELL: Final = "/bin/sh"
_OUTPUT_MAX: Final = 2000
# HTTP 2xx.
_SUCCESS_CLASS: Final = 2


def alert_body(alert: TakenAlert) -> dict[str, Any]:
    """Return the JSON document a webhook receives (a command finds it in `QL3_ALERT_JSON`)."""
    return {
        "alert_id": alert.alert_id,
        "kind": alert.kind,
        "schedule": alert.schedule_name,
        "schedule_id": alert.schedule_id,
        "subject": alert.subject_key,
        "run_id": alert.run_id,
        "occurrence_ms": alert.occurrence_ms,
        "raised_at_ms": alert.raised_at_ms,
        "attempt": alert.attempt_number,
        "detail": alert.detail,
    }


def alert_environment(alert: TakenAlert) -> dict[str, str]:
    """Return the worker's environment without its `QL3_*` settings, plus the alert's variables."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("QL3_")}
    env.update(
        QL3_ALERT_ID=str(alert.alert_id),
        QL3_ALERT_KIND=alert.kind,
        QL3_ALERT_SCHEDULE=alert.schedule_name,
        QL3_ALERT_SUBJECT=str(alert.subject_key),
        QL3_ALERT_RUN_ID="" if alert.run_id is None else str(alert.run_id),
        QL3_ALERT_OCCURRENCE_MS="" if alert.occurrence_ms is None else str(alert.occurrence_ms),
        QL3_ALERT_RAISED_AT_MS=str(alert.raised_at_ms),
        QL3_ALERT_ATTEMPT=str(alert.attempt_number),
        QL3_ALERT_JSON=json.dumps(alert_body(alert), sort_keys=True, separators=(",", ":")),
    )
    return env


def _run_command(alert: TakenAlert, command: str, timeout_s: float) -> str | None:
    """Run the alert command; None when it exited 0, else why it failed."""
    try:
        # The command is the schedule's alert definition, written by an operator (ql3_admin),
        # run as the shell would run it, like a command task.
        process = subprocess.Popen(  # noqa: S603
            [_SHELL, "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=alert_environment(alert),
            start_new_session=True,
        )
    except OSError as exc:
        return f"command: cannot start {_SHELL}: {exc}"
    try:
        output, _ = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        return f"command: timed out after {timeout_s:g} s"
    finally:
        # Whatever the shell left behind in its group goes with it.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
    if process.returncode != 0:
        tail = output.decode(errors="replace")[-_OUTPUT_MAX:]
        return f"command: exit code {process.returncode}: {tail}"
    return None


def _post_webhook(alert: TakenAlert, url: str, timeout_s: float) -> str | None:
    """POST the alert as JSON; None on a 2xx answer, else why it failed."""
    data = json.dumps(alert_body(alert), sort_keys=True).encode()
    request = urllib.request.Request(  # noqa: S310 - the URL's scheme is checked http(s)
        url,
        data=data,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Idempotency-Key": f"ql3-alert-{alert.alert_id}",
            "User-Agent": "ql3-worker",
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as answer:  # noqa: S310
            status = int(answer.status)
    except urllib.error.HTTPError as exc:
        return f"webhook: HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return f"webhook: {type(exc).__name__}: {exc}"
    if status // 100 != _SUCCESS_CLASS:  # pragma: no cover - urllib raises HTTPError for these
        return f"webhook: HTTP {status}"
    return None


def deliver_alert(
    alert: TakenAlert,
    *,
    command_timeout_s: float = ALERT_COMMAND_TIMEOUT_S,
    webhook_timeout_s: float = ALERT_WEBHOOK_TIMEOUT_S,
) -> str | None:
    """Deliver `alert` through every channel it names; None when all succeeded, else the errors.

    An alert without a channel is delivered at once: it is recorded, counted and listed only.
    Both channels are tried even when the first fails, and both again on a retry (the receiver
    deduplicates on the idempotency key).
    """
    errors = []
    if alert.command is not None:
        error = _run_command(alert, alert.command, command_timeout_s)
        if error is not None:
            errors.append(error)
    if alert.webhook is not None:
        error = _post_webhook(alert, alert.webhook, webhook_timeout_s)
        if error is not None:
            errors.append(error)
    return "; ".join(errors) if errors else None
