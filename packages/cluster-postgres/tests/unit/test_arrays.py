"""The array literals the fenced commit binds its integers and ctids as (`repository/_arrays`).

The commit statement casts them (`::bigint[]`, `::tid[]`), so their shape is PostgreSQL's array
input syntax exactly: NULL for a missing cursor, each ctid double-quoted (it holds a comma), and
an empty batch as `{}`. The integration tests of the commit send them to a real server.
"""

from __future__ import annotations

from ql3_cluster_postgres.repository._arrays import bigint_array, tid_array


def test_integers_are_joined_with_their_sign_and_none_is_null() -> None:
    """An exhausted schedule's cursor is None: it must reach the server as NULL."""
    assert bigint_array([1, -2, 1_800_000_000_000]) == "{1,-2,1800000000000}"
    assert bigint_array([3, None, 4]) == "{3,NULL,4}"
    assert bigint_array([None]) == "{NULL}"
    assert bigint_array([]) == "{}"


def test_ctids_are_quoted_elements() -> None:
    """A ctid holds a comma, so each one is a quoted element of the literal."""
    assert tid_array(["(0,1)", "(12,3)"]) == '{"(0,1)","(12,3)"}'
    assert tid_array(["(0,0)"]) == '{"(0,0)"}'
    assert tid_array([]) == "{}"
