"""Who may reach the console: loopback only, unless a token or basic auth guards it.

`check_exposure` refuses to start a console bound to anything but loopback without a guard
(anyone on the network could read the history otherwise). `AccessGuard` is the ASGI middleware
that checks the token (`Authorization: Bearer`, or `?token=` once, which sets a cookie) or the
basic-auth pair on every request. `CsrfToken` is the secret the action forms carry: a POST
without it is refused, so another site cannot make an operator's browser pause a schedule.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final
from urllib.parse import parse_qs

from ql3_cluster_control._config import ConfigurationError

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "AccessGuard",
    "CsrfToken",
    "WebAccess",
    "check_exposure",
    "is_loopback",
    "parse_basic_auth",
]

_COOKIE: Final = "ql3_console_token"
_LOOPBACK_NAMES: Final = frozenset({"localhost", "ip6-localhost"})


@dataclass(frozen=True)
class WebAccess:
    """The guard a console runs behind: a token, a basic-auth pair, or neither (loopback)."""

    token: str | None = None
    basic_user: str | None = None
    basic_password: str | None = None

    @property
    def guarded(self) -> bool:
        """Tell whether any credential is required."""
        return self.token is not None or self.basic_user is not None


def parse_basic_auth(text: str) -> tuple[str, str]:
    """Read `--basic-auth USER:PASSWORD`.

    Raises:
        ConfigurationError: no colon, or an empty user or password.

    """
    user, colon, password = text.partition(":")
    if not colon or not user or not password:
        msg = "--basic-auth: must be USER:PASSWORD, both non-empty"
        raise ConfigurationError(msg)
    return user, password


def is_loopback(host: str) -> bool:
    """Tell whether `host` (a name or an address) only listens on this machine."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, access: WebAccess) -> None:
    """Refuse a console bound beyond loopback without a token or basic auth.

    Raises:
        ConfigurationError: `host` is not loopback and `access` requires nothing.

    """
    if not is_loopback(host) and not access.guarded:
        msg = (
            f"--bind {host}: the console would be open to the network; bind 127.0.0.1 or pass"
            " --token or --basic-auth"
        )
        raise ConfigurationError(msg)


class CsrfToken:
    """The per-process secret every action form carries and every POST must echo."""

    def __init__(self) -> None:
        self.value = secrets.token_urlsafe(32)

    def matches(self, given: str | None) -> bool:
        """Tell whether `given` is this process's token (constant-time comparison)."""
        return given is not None and hmac.compare_digest(given.encode(), self.value.encode())


class AccessGuard:
    """ASGI middleware: every HTTP request must carry the console's credential, if it has one."""

    def __init__(self, app: ASGIApp, access: WebAccess) -> None:
        self._app = app
        self._access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self._access.guarded:
            await self._app(scope, receive, send)
            return
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope["headers"]
        }
        if self._allowed(headers):
            await self._app(scope, receive, send)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = query.get("token", [None])[0]
        if self._access.token is not None and _same(given, self._access.token):
            await self._app(scope, receive, _with_cookie(send, self._access.token))
            return
        await _refuse(send, basic=self._access.basic_user is not None)

    def _allowed(self, headers: dict[str, str]) -> bool:
        token = self._access.token
        authorization = headers.get("authorization", "")
        if token is not None:
            if authorization.startswith("Bearer ") and _same(authorization[7:], token):
                return True
            if _same(_cookie(headers.get("cookie", "")), token):
                return True
        if self._access.basic_user is not None and authorization.startswith("Basic "):
            try:
                pair = base64.b64decode(authorization[6:], validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return False
            user, _, password = pair.partition(":")
            return _same(user, self._access.basic_user) & _same(
                password, self._access.basic_password
            )
        return False


def _same(given: str | None, expected: str | None) -> bool:
    if given is None or expected is None:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def _cookie(header: str) -> str | None:
    for part in header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == _COOKIE:
            return value
    return None


def _with_cookie(send: Send, token: str) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            cookie = f"{_COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
            message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
        await send(message)

    return wrapped


async def _refuse(send: Send, *, basic: bool) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if basic:
        headers.append((b"www-authenticate", b'Basic realm="ql3"'))
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": b"ql3 console: credentials required\n"})
