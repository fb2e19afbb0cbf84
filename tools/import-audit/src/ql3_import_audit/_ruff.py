"""Run ruff's banned-api rule (TID251) for the direct wall-clock spellings over every audited file.

The banned list is the root pyproject's `[tool.ruff.lint.flake8-tidy-imports.banned-api]` merged
over this tool's own floor (`BANNED_API`), written to a temporary ruff.toml and passed with
`--config`: the audit then also holds in a tree whose root pyproject lost or lacks the list (the
fixture trees), and no exclude pattern of the root config can hide a file from it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ._findings import RULE_CLOCK, AuditToolError, Finding

if TYPE_CHECKING:
    from ._layout import Workspace

_WALL = "rule zero: node wall clock; read time from the database (clock_timestamp())"
BANNED_API: Final[dict[str, str]] = {
    "time.time": _WALL,
    "time.time_ns": _WALL,
    "datetime.datetime.now": _WALL,
    "datetime.datetime.utcnow": _WALL,
    "datetime.datetime.today": _WALL,
    "datetime.date.today": _WALL,
}


def banned_api(root: Path) -> dict[str, str]:
    """Return the banned-api table: the tool's floor updated with the root pyproject's list."""
    banned = dict(BANNED_API)
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        with pyproject.open("rb") as handle:
            table: object = tomllib.load(handle)
        for key in ("tool", "ruff", "lint", "flake8-tidy-imports", "banned-api"):
            table = table.get(key, {}) if isinstance(table, dict) else {}
        if isinstance(table, dict):
            for name, entry in table.items():
                message = entry.get("msg") if isinstance(entry, dict) else None
                banned[str(name)] = str(message or "rule zero")
    return banned


def _config_text(banned: dict[str, str]) -> str:
    lines = ['target-version = "py311"', "", "[lint.flake8-tidy-imports.banned-api]"]
    lines += [
        f"{json.dumps(name)}.msg = {json.dumps(message)}"
        for name, message in sorted(banned.items())
    ]
    return "\n".join(lines) + "\n"


def check_ruff(workspace: Workspace) -> list[Finding]:
    """Return ruff TID251 findings (as rule zero) for every audited file."""
    files = [
        workspace.relative(path)
        for folder in workspace.rule_zero_folders()
        for path in workspace.python_files(folder)
    ]
    if not files:
        return []
    with tempfile.TemporaryDirectory(prefix="ql3-ruff-") as tmp:
        config = Path(tmp) / "ruff.toml"
        config.write_text(_config_text(banned_api(workspace.root)), encoding="utf-8")
        command = [
            sys.executable, "-m", "ruff", "check", "--config", str(config), "--select", "TID251",
            "--output-format", "json", "--no-cache", "--exit-zero", *files,
        ]  # fmt: skip
        # Our own interpreter running an installed tool on paths we listed: no untrusted input.
        result = subprocess.run(  # noqa: S603
            command, capture_output=True, text=True, check=False, cwd=workspace.root
        )
    if result.returncode != 0:
        raise AuditToolError(f"ruff could not run: {result.stderr.strip()}")
    return [
        Finding(
            workspace.relative(Path(item["filename"])),
            int(item["location"]["row"]),
            RULE_CLOCK,
            f"{item['message']} (ruff TID251)",
        )
        for item in json.loads(result.stdout)
    ]
