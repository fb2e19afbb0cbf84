"""The public surface of ql3_cluster_postgres is exactly its sorted `__all__` (like httpx)."""

from __future__ import annotations

import types

import ql3_cluster_postgres
from ql3_runtime_core import QL3Error


def _isort_key(name: str) -> tuple[int, str]:
    """Sort like ruff RUF022: CONSTANTS, then Classes, then everything else."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_all_is_sorted() -> None:
    """`__all__` is in RUF022 (isort-style) order without duplicates."""
    names = ql3_cluster_postgres.__all__
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


def test_all_imports_are_exported() -> None:
    """Every public module attribute is in `__all__`, and `__all__` names only real attributes."""
    public = {
        name
        for name, value in vars(ql3_cluster_postgres).items()
        if (not name.startswith("_") or name == "__version__")
        and not isinstance(value, types.ModuleType)
        and value is not getattr(__import__("__future__"), "annotations", None)
    }
    assert set(ql3_cluster_postgres.__all__) == public


def test_public_errors_are_ql3_errors_shown_at_the_package() -> None:
    """Every exported exception is a QL3Error whose traceback names the supported import path."""
    errors = [
        value
        for value in vars(ql3_cluster_postgres).values()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert errors
    assert all(issubclass(error, QL3Error) for error in errors)
    assert {error.__module__ for error in errors} == {"ql3_cluster_postgres"}
