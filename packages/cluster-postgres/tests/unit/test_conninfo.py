"""check_conninfo: a connection string is checked without connecting, and never echoed."""

from __future__ import annotations

import pytest
from ql3_cluster_postgres import InvalidConninfoError, check_conninfo


@pytest.mark.parametrize(
    "conninfo",
    ["", "host=db port=5432 dbname=ql3", "postgresql://u:p@db:5432/ql3?sslmode=require"],
)
def test_libpq_strings_and_uris_pass(conninfo: str) -> None:
    """Key=value pairs, URIs and the empty string (libpq defaults) are accepted."""
    check_conninfo(conninfo)


@pytest.mark.parametrize("conninfo", ["host=x password=hunter2 = =", "postgresql://u:hunter2@[x"])
def test_a_malformed_string_names_the_field_and_hides_the_value(conninfo: str) -> None:
    """A string libpq cannot parse raises InvalidConninfoError naming the field, not the value."""
    with pytest.raises(InvalidConninfoError) as caught:
        check_conninfo(conninfo, field="dsn")
    assert str(caught.value) == "dsn: not a valid libpq connection string or URI"
    assert caught.value.field == "dsn"
    assert isinstance(caught.value, ValueError)
    assert "hunter2" not in str(caught.value)
