"""The statements as sent: whole-line comments dropped, code intact, short enough to be cached."""

from __future__ import annotations

from importlib import resources

from psycopg import _queries
from ql3_cluster_postgres._sql import query


def _sql_files() -> dict[str, str]:
    folder = resources.files("ql3_cluster_postgres").joinpath("sql")
    return {
        entry.name.removesuffix(".sql"): entry.read_text(encoding="utf-8")
        for entry in folder.iterdir()
        if entry.name.endswith(".sql")
    }


def test_every_statement_fits_psycopg_placeholder_cache() -> None:
    """Every statement is sent short enough for psycopg to convert its placeholders once."""
    files = _sql_files()
    too_long = {
        name: len(query(name))
        for name in files
        if len(query(name)) > _queries.MAX_CACHED_STATEMENT_LENGTH
    }
    assert not too_long, f"statements psycopg re-parses on every call: {too_long}"


def test_sent_statement_keeps_every_code_line_of_its_file() -> None:
    """Only whole-line comments and indentation are dropped; the first line names the file."""
    for name, text in _sql_files().items():
        code = [
            line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith("--")
        ]
        sent = query(name).splitlines()
        assert sent[0] == f"-- ql3: {name}"
        assert sent[1:] == code, name
