"""What every `ql3` verb shares: exit codes, the `--dsn`/`--json` options, one-line errors.

Exit codes scripts can rely on: 0 success, 2 usage or configuration error (bad flag, bad cron
expression, unknown timezone, unknown `QL3_*` variable), 3 schema mismatch, 1 any other failure
(unreachable database, unknown schedule, a violation found by `verify`). Errors are one line on
stderr, `ql3: error: ...`, never a traceback: each verb is wrapped in `guarded`.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from ql3_cluster_postgres import SchemaMismatchError
from ql3_runtime_core import QL3Error

from ql3_cluster_control._config import ConfigurationError

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "EXIT_FAILURE",
    "EXIT_INTERRUPTED",
    "EXIT_SCHEMA",
    "EXIT_USAGE",
    "AsJson",
    "Dsn",
    "describe_validation",
    "fail",
    "guarded",
    "is_usage",
    "print_json",
    "require_dsn",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_SCHEMA = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a Ctrl-C

Dsn = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar="QL3_DSN",
        show_envvar=True,
        help="libpq connection string or URI of the QL3 database.",
    ),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def fail(code: int, message: str) -> typer.Exit:
    # Returns the Exit instead of raising it, so each caller writes `raise fail(...) from None`:
    # the type checker sees the raise, and `from None` keeps the cause out of any traceback.
    # Driver messages span lines (libpq adds a hint line): keep the promise of one line. Only
    # line breaks go: a quoted value keeps its spaces ('   ' is not ' ').
    one_line = " ".join(line.strip() for line in message.splitlines() if line.strip())
    sys.stderr.write(f"ql3: error: {one_line}\n")
    sys.stderr.flush()
    return typer.Exit(code)


def describe_validation(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"])
        detail = error["msg"].removeprefix("Value error, ")
        parts.append(detail if not field or detail.startswith(field) else f"{field}: {detail}")
    return "; ".join(parts)


def guarded(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """Turn QL3 errors into one stderr line and the documented exit code."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # Most specific first: a schema mismatch and a configuration error are QL3Errors too,
        # but have exit codes of their own.
        try:
            return func(*args, **kwargs)
        except SchemaMismatchError as exc:
            raise fail(EXIT_SCHEMA, str(exc)) from None
        except ValidationError as exc:
            raise fail(EXIT_USAGE, describe_validation(exc)) from None
        except ConfigurationError as exc:
            raise fail(EXIT_USAGE, str(exc)) from None
        except QL3Error as exc:
            code = EXIT_USAGE if isinstance(exc, ValueError) and is_usage(exc) else EXIT_FAILURE
            raise fail(code, str(exc)) from None
        except OSError as exc:
            raise fail(EXIT_FAILURE, str(exc)) from None

    return wrapper


def is_usage(exc: QL3Error) -> bool:
    """Bad values given on the command line (cron, zone, a number out of range) are usage errors."""
    from ql3_runtime_core import (  # noqa: PLC0415
        InvalidArgumentError,
        InvalidCronError,
        UnknownTimezoneError,
    )

    return isinstance(exc, InvalidCronError | UnknownTimezoneError | InvalidArgumentError)


def require_dsn(dsn: str | None) -> str:
    if not dsn:
        msg = "no database given: pass --dsn or set QL3_DSN"
        raise ConfigurationError(msg)
    return dsn


def print_json(value: object) -> None:
    # One line, keys sorted: stable for scripts and diffs; `str` for UUIDs and the like.
    sys.stdout.write(json.dumps(value, indent=None, sort_keys=True, default=str) + "\n")
