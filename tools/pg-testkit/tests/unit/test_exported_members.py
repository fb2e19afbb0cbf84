"""The public surface of ql3_testkit is exactly its sorted `__all__` (shared checks)."""

from __future__ import annotations

import ql3_testkit
from ql3_runtime_core import QL3Error
from ql3_test_support import check_all_complete, check_all_sorted, check_public_errors


def test_all_is_sorted() -> None:
    """`__all__` is in RUF022 (isort-style) order without duplicates."""
    check_all_sorted(ql3_testkit)


def test_all_lists_exactly_the_public_names() -> None:
    """Every public name (and `__version__`) is in `__all__`, and `__all__` names nothing else."""
    check_all_complete(ql3_testkit)


def test_public_errors_are_ql3_errors_shown_at_the_package() -> None:
    """Every exported exception is a QL3Error whose traceback names the supported import path."""
    check_public_errors(ql3_testkit, QL3Error)
