"""`ql3 roles login`: a login user for one QL3 role, without a password in clear anywhere.

The password is read from a hidden prompt (twice) or, for scripts, from standard input
(`--password-stdin`), never from an argument (which `ps` and shell history would show). What
reaches the server is the SCRAM-SHA-256 verifier computed here, so no server log, statement
statistic or error message can hold the password either.
"""

# typer builds options from parameters with defaults, boolean flags included.
# ruff: noqa: FBT002

from __future__ import annotations

import sys
from typing import Annotated

import typer
from ql3_cluster_postgres import ROLE_NAMES, UnknownRoleError, create_login_user, group_role_name

from ql3_cluster_control._config import ConfigurationError

from ._common import Dsn, guarded, require_dsn

__all__ = ["roles_login"]

_ROLES = ", ".join(ROLE_NAMES)


def _read_password(*, from_stdin: bool) -> str:
    """Return the password from standard input's first line, or from a hidden prompt."""
    if from_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = typer.prompt("password", hide_input=True, confirmation_prompt=True)
    if not password:
        msg = "password: must not be empty"
        raise ConfigurationError(msg)
    return password


@guarded
def roles_login(
    name: Annotated[str, typer.Argument(help="The login user to create (or update).")],
    role: Annotated[
        str,
        typer.Option(
            "--role", help=f"The QL3 role it acts as: {_ROLES} (or the group name, ql3_<role>)."
        ),
    ],
    password_stdin: Annotated[
        bool,
        typer.Option(
            "--password-stdin", help="Read the password from the first line of standard input."
        ),
    ] = False,
    dsn: Dsn = None,
) -> None:
    """Create (or update) login NAME in one QL3 group; run it as a superuser.

    The password is prompted for (hidden, twice) or read from standard input; only its
    SCRAM-SHA-256 verifier is sent. Rerunning it sets a new password (rotation).
    """
    try:
        group = group_role_name(role)  # an unknown role fails here, before any prompt
    except UnknownRoleError as exc:
        msg = f"--role: {exc}"
        raise ConfigurationError(msg) from exc
    target = require_dsn(dsn)
    create_login_user(target, name, _read_password(from_stdin=password_stdin), group)
    typer.echo(f"login {name}: member of {group} (SCRAM-SHA-256 verifier stored)")
