"""The overlap policy and cap of a schedule, read from people's text (DESIGN §10).

`ql3 schedule add --overlap/--max-running` and a schedule file's `overlap` / `max_running` keys
go through `with_overlap`, so both are checked by one path and an error names what the person
wrote (the flag on the command line, the key in a file), before anything connects.
"""

from __future__ import annotations

from ql3_runtime_core import MAX_RUNNING_MAX, OverlapPolicy, TaskExecution

from ._config import ConfigurationError

__all__ = ["OVERLAP_KEYS", "overlap_text", "with_overlap"]

# The schedule file keys this module reads.
OVERLAP_KEYS = ("overlap", "max_running")


def with_overlap(
    execution: TaskExecution,
    overlap: object = OverlapPolicy.ALLOW.value,
    max_running: object = None,
    *,
    fields: tuple[str, str] = OVERLAP_KEYS,
) -> TaskExecution:
    """Return `execution` with the policy and cap; `fields` name them in errors.

    Without a cap, `skip` and `replace` get a cap of one live Run and `allow` none (every Run
    executes at once, as before these settings existed).

    Raises:
        ConfigurationError: a policy that is not allow, skip or replace, or a cap that is not an
            integer within 1..MAX_RUNNING_MAX; nothing is written.

    """
    overlap_field, cap_field = fields
    try:
        policy = OverlapPolicy(overlap) if isinstance(overlap, str) else None
    except ValueError:
        policy = None
    if policy is None:
        choices = ", ".join(member.value for member in OverlapPolicy)
        msg = f"{overlap_field}: {overlap!r} is not one of {choices}"
        raise ConfigurationError(msg)
    # bool is an int in Python, but `max_running = true` in a file is a mistake, not a 1.
    cap: int | None = None
    if max_running is not None:
        if isinstance(max_running, bool) or not isinstance(max_running, int):
            msg = f"{cap_field}: {max_running!r} is not an integer"
            raise ConfigurationError(msg)
        if not 1 <= max_running <= MAX_RUNNING_MAX:
            msg = f"{cap_field}: must be within 1..{MAX_RUNNING_MAX}, got {max_running}"
            raise ConfigurationError(msg)
        cap = max_running
    return TaskExecution.model_validate(
        {**execution.model_dump(), "overlap": policy, "max_running": cap}
    )


def overlap_text(execution: TaskExecution) -> str:
    """Say the policy and cap in a few words: `allow` alone when nothing ever waits."""
    if execution.max_running is None:
        return execution.overlap.value
    return f"{execution.overlap.value} (max running {execution.max_running})"
