"""`ql3 demo --web` serves the console while the demo runs (a real `ql3` process).

The page is polled over HTTP until it lists the demo's schedules, read as the demo's own
observer login, and the demo still passes its verdict afterwards.
"""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.error
import urllib.request

from fix_db import clean_env, ql3_executable


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _page(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310  # loopback
            return str(answer.read().decode())
    except (urllib.error.URLError, ConnectionError):
        return None


def test_the_demo_serves_the_console_while_it_runs() -> None:
    """The schedules page lists the demo's schedules during the run; the demo then passes."""
    url = f"http://127.0.0.1:{_free_port()}"
    demo = subprocess.Popen(
        [*ql3_executable(), "demo", "--seconds", "10", "--schedules", "2", "--replicas", "2",
         "--web", "--web-bind", url.removeprefix("http://")],
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        page = None
        while time.monotonic() < deadline and demo.poll() is None:
            page = _page(f"{url}/")
            if page is not None and page.count('data-schedule="demo-') >= 3:
                break
            time.sleep(0.5)
        assert page is not None, "the console never answered while the demo ran"
        assert page.count('data-schedule="demo-') == 3  # two schedules and the overlap one
        assert "(database clock)" in page
        out, err = demo.communicate(timeout=120)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(timeout=20)
    assert demo.returncode == 0, (out, err)
    assert "web console: http://" in err
    assert _page(f"{url}/") is None  # the console stopped with the demo
