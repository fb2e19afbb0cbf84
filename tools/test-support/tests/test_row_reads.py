"""The row-read guard flags every planted positional read and passes reads by column name."""

from __future__ import annotations

import types
from pathlib import Path  # noqa: TC003  # pytest resolves fixture annotations

import pytest
from ql3_test_support import check_rows_by_name, positional_row_reads

POSITIONAL = [
    "value = row[0]",
    "value = self.last_row[2]",
    "value = cur.fetchone()[0]",
    "value = conn.execute(sql).fetchone()[1]",
    "value = rows[0][0]",
    "value = cur.fetchall()[0][1]",
    "value = reader.rows('now')[0][0]",
    "value = row[-1]",
    "(count,) = cur.fetchone()",
    "first, second = row",
    "value = named_row(cur)[0]",
]

BY_NAME = [
    "value = row['id']",
    "value = cur.fetchone()['now_ms']",
    "value = rows[0]['id']",
    "value = reader.rows('verify_now')[0]['now_ms']",
    "(row,) = self._rows('finish_attempt', params)",
    "first = rows[0]",
    "program = sys.argv[0]",
    "error = exc.errors()[0]",
    "port = sock.getsockname()[1]",
    "a, b = pair",
]


@pytest.mark.parametrize("line", POSITIONAL)
def test_each_positional_read_is_flagged(line: str) -> None:
    """A column read by position, or a row unpacked into names, is reported with its line."""
    assert positional_row_reads(f"x = 1\n{line}\n", "planted.py") == [f"planted.py:2: {line}"]


@pytest.mark.parametrize("line", BY_NAME)
def test_reads_by_name_and_other_subscripts_pass(line: str) -> None:
    """Reads by column name, the first row of a list, and non-row subscripts are not flagged."""
    assert positional_row_reads(f"{line}\n") == []


def _package(root: Path, source: str) -> types.ModuleType:
    folder = root / "planted_pkg"
    folder.mkdir()
    (folder / "__init__.py").write_text("", encoding="utf-8")
    (folder / "_reader.py").write_text(source, encoding="utf-8")
    module = types.ModuleType("planted_pkg")
    module.__file__ = str(folder / "__init__.py")
    return module


def test_check_names_each_offending_line_of_a_package(tmp_path: Path) -> None:
    """The package check fails naming the module and line of each positional read."""
    module = _package(tmp_path, "def now(cur):\n    return cur.fetchone()[0]\n")
    with pytest.raises(AssertionError, match=r"planted_pkg/_reader\.py:2: return cur\.fetchone"):
        check_rows_by_name(module)


def test_check_passes_a_package_that_reads_by_name(tmp_path: Path) -> None:
    """A package whose rows are read by column name passes."""
    check_rows_by_name(_package(tmp_path, "def now(cur):\n    return cur.fetchone()['now']\n"))


def test_check_refuses_an_empty_folder(tmp_path: Path) -> None:
    """A module whose folder holds no Python fails instead of passing on nothing."""
    module = types.ModuleType("ghost")
    module.__file__ = str(tmp_path / "ghost" / "__init__.py")
    with pytest.raises(AssertionError, match="no Python module found"):
        check_rows_by_name(module)
