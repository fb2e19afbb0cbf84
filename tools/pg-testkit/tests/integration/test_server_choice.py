"""The session's PostgreSQL is chosen by QL3TEST_PG_VERSION or QL3TEST_PG_BIN (any major)."""

from __future__ import annotations

import pytest
from ql3_cluster_postgres import find_postgres_bin_dir
from ql3_testkit import ThrowawayClusterError, server_major_version, testkit_bin_dir


def test_without_a_choice_the_product_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    """With neither variable set the kit leaves the choice to the product's lookup."""
    monkeypatch.delenv("QL3TEST_PG_VERSION", raising=False)
    monkeypatch.delenv("QL3TEST_PG_BIN", raising=False)
    assert testkit_bin_dir() is None


def test_a_version_finds_a_server_of_that_version(monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking for the machine's version returns a folder whose server reports it."""
    monkeypatch.delenv("QL3TEST_PG_BIN", raising=False)
    major = server_major_version(find_postgres_bin_dir())
    monkeypatch.setenv("QL3TEST_PG_VERSION", str(major))
    found = testkit_bin_dir()
    assert found is not None
    assert server_major_version(found) == major


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"QL3TEST_PG_VERSION": "eighteen"}, "not a major version"),
        ({"QL3TEST_PG_VERSION": "9"}, "no PostgreSQL 9 server found"),
        ({"QL3TEST_PG_BIN": "/nonexistent/bin"}, "no postgres binary there"),
    ],
)
def test_a_choice_that_cannot_be_met_is_an_error(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], message: str
) -> None:
    """A version or folder that is not there fails, never falls back to another server."""
    monkeypatch.delenv("QL3TEST_PG_VERSION", raising=False)
    monkeypatch.delenv("QL3TEST_PG_BIN", raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ThrowawayClusterError, match=message):
        testkit_bin_dir()


def test_a_folder_of_another_version_than_asked_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """QL3TEST_PG_BIN running another major than QL3TEST_PG_VERSION is refused."""
    folder = find_postgres_bin_dir()
    other = server_major_version(folder) + 1
    monkeypatch.setenv("QL3TEST_PG_BIN", str(folder))
    monkeypatch.setenv("QL3TEST_PG_VERSION", str(other))
    with pytest.raises(ThrowawayClusterError, match=f"not QL3TEST_PG_VERSION={other}"):
        testkit_bin_dir()
