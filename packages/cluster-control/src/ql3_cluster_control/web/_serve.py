"""Serve the console with uvicorn: `ql3 web` in the foreground, `ql3 demo --web` beside a demo."""

from __future__ import annotations

import threading
from typing import Final

import uvicorn

from ._app import ConsoleSettings, console_app
from ._guard import check_exposure

__all__ = ["ConsoleServer", "parse_bind", "serve_console"]

_DEFAULT_PORT: Final = 8080


def parse_bind(text: str) -> tuple[str, int]:
    """Read `--bind HOST:PORT` (`[::1]:8080` for IPv6; a bare host takes port 8080).

    Raises:
        ValueError: the port is not a number in 0..65535.

    """
    host, colon, port = text.rpartition(":")
    if not colon or (host.startswith("[") != host.endswith("]")):
        return text.strip("[]"), _DEFAULT_PORT
    number = int(port)
    if not 0 <= number <= 65535:  # noqa: PLR2004  # the TCP port range
        msg = f"--bind: port {number} is outside 0..65535"
        raise ValueError(msg)
    return host.strip("[]"), number


def _server(settings: ConsoleSettings, host: str, port: int) -> uvicorn.Server:
    check_exposure(host, settings.access)
    config = uvicorn.Config(
        console_app(settings), host=host, port=port, log_level="warning", access_log=False
    )
    return uvicorn.Server(config)


def serve_console(settings: ConsoleSettings, host: str, port: int) -> None:
    """Serve until interrupted (SIGINT/SIGTERM stop uvicorn cleanly).

    Raises:
        ConfigurationError: bound beyond loopback without a token or basic auth.

    """
    _server(settings, host, port).run()


class ConsoleServer:
    """A console served from a background thread (the demo's), stopped by `stop()`."""

    def __init__(self, settings: ConsoleSettings, host: str, port: int) -> None:
        self.url = f"http://{host}:{port}"
        self._server = _server(settings, host, port)
        self._thread = threading.Thread(target=self._server.run, name="ql3-web", daemon=True)

    def start(self) -> None:
        """Start serving; return once the socket listens.

        Raises:
            OSError: the server gave up before listening (say, the port is taken).

        """
        self._thread.start()
        while not self._server.started and self._thread.is_alive():
            self._thread.join(0.05)
        if not self._server.started:
            msg = f"the web console could not listen on {self.url}"
            raise OSError(msg)

    def stop(self) -> None:
        """Ask the server to exit and wait for its thread."""
        self._server.should_exit = True
        self._thread.join(10)
