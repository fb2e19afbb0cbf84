"""The public surface of ql3_runtime_core is exactly its sorted `__all__` (like httpx)."""

from __future__ import annotations

import ql3_runtime_core


def _isort_key(name: str) -> tuple[int, str]:
    """Sort like ruff RUF022: CONSTANTS, then Classes, then everything else."""
    if name.isupper() and len(name) > 1:
        return (0, name)
    if name[:1].isupper():
        return (1, name)
    return (2, name)


def test_all_is_sorted() -> None:
    """`__all__` is in RUF022 (isort-style) order without duplicates."""
    names = ql3_runtime_core.__all__
    assert names == sorted(names, key=_isort_key)
    assert len(set(names)) == len(names)


def test_all_imports_are_exported() -> None:
    """Every public module attribute is in `__all__`, and `__all__` names only real attributes."""
    public = {
        name
        for name, value in vars(ql3_runtime_core).items()
        if (not name.startswith("_") or name == "__version__")
        and value is not getattr(__import__("__future__"), "annotations", None)
    }
    assert set(ql3_runtime_core.__all__) == public


def test_public_errors_report_the_package_as_module() -> None:
    """Public exception classes show the supported import path in tracebacks."""
    errors = [
        value
        for value in vars(ql3_runtime_core).values()
        if isinstance(value, type) and issubclass(value, Exception)
    ]
    assert errors
    assert {error.__module__ for error in errors} == {"ql3_runtime_core"}
