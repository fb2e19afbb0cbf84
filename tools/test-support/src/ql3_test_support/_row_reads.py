"""The guard against positional row reads: rows are read by column name only.

A read such as `row[0]` or `cur.fetchone()[0]` makes the column order of a statement's SELECT or
RETURNING list a second, silent contract between the SQL file and the Python: reorder the
columns and the code reads the wrong value without an error. The packages read rows through
psycopg's `dict_row` or `class_row` factories instead, and this check keeps it that way.

It reads the installed package's source as text (`ast`, nothing is imported or run), so the
wheel under test is what is checked. What counts as a positional row read:

- an integer subscript of a name or attribute ending in `row` (`row[0]`, `self.last_row[2]`);
- an integer subscript of a call to `fetchone()` (`cur.fetchone()[0]`);
- an integer subscript of an integer subscript of rows (`rows[0][0]`, `cur.fetchall()[0][1]`):
  the first row is fine (`rows[0]["id"]`), a column by position in it is not;
- unpacking a row into a tuple (`(count,) = cur.fetchone()`, `a, b = row`).

A name that is not a row (`argv[0]`, `exc.errors()[0]`) is not flagged: the rule keys on the
words the packages use for rows, which the planted cases in this package's tests pin.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import types

__all__ = ["check_rows_by_name", "positional_row_reads"]

# Calls whose result is one row, and calls whose result is a list of rows, beside those whose
# name says so (`named_row(...)`, `self._rows(...)`).
_ONE_ROW_CALLS = frozenset({"fetchone"})
_ROWS_CALLS = frozenset({"fetchall", "fetchmany"})


def _name(node: ast.expr) -> str:
    """Return the last name of `node` (`row` for `row` and `self.row`), "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _called(node: ast.expr) -> str:
    """Return the name a call calls (`fetchone` for `cur.fetchone()`), "" if `node` is no call."""
    return _name(node.func) if isinstance(node, ast.Call) else ""


def _is_row(node: ast.expr) -> bool:
    """Tell whether `node` holds one row: `row`, `first_row`, `cur.fetchone()`."""
    called = _called(node)
    return _name(node).lower().endswith("row") or called in _ONE_ROW_CALLS or called.endswith("row")


def _is_rows(node: ast.expr) -> bool:
    """Tell whether `node` holds a list of rows: `rows`, `cur.fetchall()`."""
    called = _called(node)
    return _name(node).lower().endswith("rows") or called in _ROWS_CALLS or called.endswith("rows")


def _integer_index(node: ast.Subscript) -> bool:
    index = node.slice
    if isinstance(index, ast.UnaryOp) and isinstance(index.op, ast.USub):
        index = index.operand  # row[-1] is as positional as row[0]
    return isinstance(index, ast.Constant) and type(index.value) is int


def _positional(node: ast.AST) -> bool:
    """Tell whether `node` reads a column of a row by its position."""
    if isinstance(node, ast.Subscript) and _integer_index(node):
        inner = node.value
        if _is_row(inner):
            return True
        # rows[0][0]: the first row's first column.
        return isinstance(inner, ast.Subscript) and _integer_index(inner) and _is_rows(inner.value)
    if isinstance(node, ast.Assign | ast.For):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        source = node.value if isinstance(node, ast.Assign) else None
        unpacks = any(isinstance(target, ast.Tuple | ast.List) for target in targets)
        return unpacks and source is not None and _is_row(source)
    return False


def positional_row_reads(source: str, filename: str = "<source>") -> list[str]:
    """Return `file:line: text` for each positional row read in `source`, in line order."""
    lines = source.splitlines()
    found = sorted(
        {
            node.lineno
            for node in ast.walk(ast.parse(source, filename=filename))
            if _positional(node) and hasattr(node, "lineno")
        }
    )
    return [f"{filename}:{line}: {lines[line - 1].strip()}" for line in found]


def check_rows_by_name(module: types.ModuleType) -> None:
    """Require no positional row read in any module of the installed package `module`.

    Raises:
        AssertionError: naming each offending line, or saying no module was found (a scan of
            nothing would pass for the wrong reason).

    """
    folder = Path(module.__file__ or "").parent
    paths = sorted(folder.rglob("*.py"))
    if not paths:
        message = f"no Python module found under {folder} for {module.__name__}"
        raise AssertionError(message)
    offences = [
        offence
        for path in paths
        for offence in positional_row_reads(
            path.read_text(encoding="utf-8"), str(path.relative_to(folder.parent))
        )
    ]
    if offences:
        message = "rows must be read by column name, not by position:\n" + "\n".join(offences)
        raise AssertionError(message)
