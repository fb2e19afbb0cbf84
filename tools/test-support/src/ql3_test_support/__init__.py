"""Checks shared by the tests of every QL3 wheel (test-only; never a dependency of a wheel).

The public surface is exactly `__all__`; see `_surface` for why these checks live here once, and
`_row_reads` for the guard that keeps rows read by column name.
"""

from __future__ import annotations

from ._module_map import check_module_map, mapped_modules
from ._row_reads import check_rows_by_name, positional_row_reads
from ._surface import (
    all_sort_key,
    check_all_complete,
    check_all_sorted,
    check_installed,
    check_public_errors,
    check_ships,
    public_names,
)

__all__ = [
    "all_sort_key",
    "check_all_complete",
    "check_all_sorted",
    "check_installed",
    "check_module_map",
    "check_public_errors",
    "check_rows_by_name",
    "check_ships",
    "mapped_modules",
    "positional_row_reads",
    "public_names",
]
