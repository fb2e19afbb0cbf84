"""The installed package reads every row by column name, never by position."""

from __future__ import annotations

import ql3_testkit
from ql3_test_support import check_rows_by_name


def test_no_module_reads_a_row_by_position() -> None:
    """No `row[0]`, `fetchone()[0]`, `rows[0][0]` or unpacked row in the package's source."""
    check_rows_by_name(ql3_testkit)
