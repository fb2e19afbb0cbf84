"""One connection factory, one SQL loader, one retry policy: no module goes around them.

Read from the installed package's source, so the wheel under test is what is checked. The
integration test `test_connection_factory` shows what the factory's connections carry; this one
shows nothing else opens a connection, reads a resource or retries by hand.
"""

from __future__ import annotations

import ast
from pathlib import Path

import ql3_cluster_postgres

_PACKAGE = Path(ql3_cluster_postgres.__file__).parent
# Every module, the rooms' (admin/, verify/, ...) included, named by its path in the package.
_MODULES = sorted(_PACKAGE.rglob("*.py"))


def _name(path: Path) -> str:
    return path.relative_to(_PACKAGE).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def _dotted(node: ast.expr) -> str:
    """Return `a.b.c` for a name or attribute chain, "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _called(path: Path) -> set[str]:
    """Return the dotted names of everything `path` calls (`psycopg.connect`, `files`, ...)."""
    return {
        _dotted(node.func)
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Call) and _dotted(node.func)
    }


def _imported(path: Path) -> set[str]:
    """Return the modules `path` imports at run time (TYPE_CHECKING blocks left out)."""
    tree = _tree(path)
    for node in list(ast.walk(tree)):
        if isinstance(node, ast.If) and _dotted(node.test) == "TYPE_CHECKING":
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


def test_the_package_has_modules_to_check() -> None:
    """The scan sees the package's modules, the factory, the loader and the policy among them."""
    names = {_name(path) for path in _MODULES}
    assert {"_connect.py", "_sql.py", "_retry.py", "repository/_repository.py"} <= names


def test_only_the_factory_opens_connections() -> None:
    """`psycopg.connect`, `Connection.connect` and `ConnectionPool` appear in `_connect.py` only."""
    opening = {"psycopg.connect", "psycopg.Connection.connect", "Connection.connect"}
    offenders = {
        _name(path)
        for path in _MODULES
        if (_called(path) & opening or "ConnectionPool" in _called(path))
        and _name(path) != "_connect.py"
    }
    pools = {_name(path) for path in _MODULES if "psycopg_pool" in _imported(path)}
    assert offenders == set()
    assert pools <= {"_connect.py"}


def test_only_the_loader_reads_package_resources() -> None:
    """`importlib.resources` is imported by `_sql.py` alone: one loader for every SQL folder."""
    readers = {_name(path) for path in _MODULES if "importlib.resources" in _imported(path)}
    assert readers == {"_sql.py"}


def test_only_the_retry_module_retries() -> None:
    """Only `_retry.py` imports tenacity, and no other module sleeps between tries.

    The private server polls its own start-up (not a database retry) and may sleep.
    """
    tenacity = {_name(path) for path in _MODULES if "tenacity" in _imported(path)}
    sleepers = {_name(path) for path in _MODULES if "time.sleep" in _called(path)}
    assert tenacity == {"_retry.py"}
    assert sleepers <= {"_retry.py", "server/_private_server.py"}
