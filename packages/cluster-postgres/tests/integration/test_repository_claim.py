"""The claim statement (DESIGN §3) against real PostgreSQL, connected as ql3_runtime."""

from __future__ import annotations

import re
from importlib import resources
from typing import TYPE_CHECKING, Any
from uuid import UUID

from psycopg import pq
from ql3_cluster_postgres import PostgresScheduleRepository
from ql3_runtime_core import zone_rules_version
from repo_helpers import command, db_now_ms, fetch, make_schedules, owner_conn, wait_until

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from pathlib import Path

    from ql3_testkit import Ql3Database

DAY_MS = 86_400_000
# A token whose 16 bytes are all printable-free of quote/backslash, so the trace parses simply.
TOKEN = UUID("11111111-2222-3333-4444-555555555555")


def _bind_values(trace: str) -> list[bytes]:
    """Decode the parameter values of the first Bind message of a libpq trace."""
    line = next(text for text in trace.splitlines() if "\tBind\t" in text)
    rest = line.split("\tBind\t", 1)[1].strip()
    match = re.match(r'"[^"]*" "[^"]*" (\d+) ', rest)
    assert match is not None
    tokens = rest[match.end() :].split(" ", int(match.group(1)))
    rest = tokens[-1]
    count_text, rest = rest.split(" ", 1)
    values: list[bytes] = []
    for _ in range(int(count_text)):
        length_text, rest = rest.split(" ", 1)
        length = int(length_text)
        assert rest[0] == "'"
        position, raw = 1, bytearray()
        while len(raw) < length:
            if rest[position] == "\\" and rest[position + 1] == "x":
                raw.append(int(rest[position + 2 : position + 4], 16))
                position += 4
            else:
                raw.append(ord(rest[position]))
                position += 1
        values.append(bytes(raw))
        rest = rest[position + 2 :]
    return values


def test_claim_sends_one_clock_read_and_no_time_parameter(
    ql3_db: Ql3Database, tmp_path: Path
) -> None:
    """The claim SQL on the wire reads clock_timestamp() once; its 5 parameters hold no time."""
    make_schedules(ql3_db, 2)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        # The replica loads the recorded zone rules first; the traced claim then carries them.
        assert repo.read_cluster_state().zone_rules.agrees
        conn = repo._connection()
        trace_path = tmp_path / "claim.trace"
        with trace_path.open("w") as trace_file:
            conn.pgconn.trace(trace_file.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            claims = repo.claim_due_schedules(command(token=TOKEN, lease_ms=5000), 7)
            conn.pgconn.untrace()
    trace = trace_path.read_text()
    parse = trace.split("\tParse\t", 1)[1].split("\tBind\t", 1)[0]
    assert parse.count("clock_timestamp()") == 1
    assert "MATERIALIZED" in parse
    values = _bind_values(trace)
    assert len(values) == 5
    now = db_now_ms(ql3_db.dsn("runtime"))
    for value in values:
        numbers = [int.from_bytes(value, "big", signed=True)]
        if value.isdigit():
            numbers.append(int(value))
        assert all(abs(number - now) > DAY_MS for number in numbers), value
    assert sorted(values) == sorted(
        [
            (7).to_bytes(2, "big"),
            b"owner-a",
            TOKEN.bytes,
            (5000).to_bytes(2, "big"),
            zone_rules_version().encode(),
        ]
    )
    assert len(claims) == 2


def test_claim_writes_its_observation(ql3_db: Ql3Database) -> None:
    """The acquired time is the row's updated_at_ms, expiry is acquired + lease, version bumps."""
    ids = make_schedules(ql3_db, 3)
    before = {row[0]: row[1] for row in fetch(ql3_db.dsn("runtime"), _VERSIONS)}
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        start = repo.database_now_ms()
        claims = repo.claim_due_schedules(command(lease_ms=12_345), 16)
    assert sorted(claim.schedule_id for claim in claims) == ids
    assert len({claim.claim_acquired_at_ms for claim in claims}) == 1
    rows = {row[0]: row for row in fetch(ql3_db.dsn("runtime"), _CLAIM_COLUMNS)}
    for claim in claims:
        sid, owner, token, expires, version, updated = rows[claim.schedule_id]
        assert claim.claim_acquired_at_ms >= start
        assert updated == claim.claim_acquired_at_ms
        assert expires == claim.claim_acquired_at_ms + 12_345 == claim.claim_expires_at_ms
        assert (owner, token) == (claim.owner_id, claim.claim_token)
        assert version == claim.version == before[sid] + 1


def test_claim_relaxes_only_its_own_commit(ql3_db: Ql3Database) -> None:
    """The claim commits without a flush wait, and the session's next transaction waits again."""
    make_schedules(ql3_db, 2)
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        conn = repo._connection()
        # The test cluster is non-durable; a durable server's default is `on`.
        conn.execute("SET synchronous_commit = on")
        claims = repo.claim_due_schedules(command(), 16)
        row = conn.execute("SHOW synchronous_commit").fetchone()
    assert len(claims) == 2
    assert row is not None
    # The fenced commit that follows a claim is synchronous again (DESIGN §3).
    assert row[0] == "on"
    text = resources.files("ql3_cluster_postgres").joinpath("sql", "claim_due_schedules.sql")
    assert "set_config('synchronous_commit', 'off', true)" in text.read_text(encoding="utf-8")


def test_claim_takes_only_due_unclaimed_active_rows_in_due_order(ql3_db: Ql3Database) -> None:
    """Future cursors, held claims and paused rows are skipped; the batch is earliest due first."""
    due = make_schedules(ql3_db, 4, prefix="due", shift_back_ms=5000)
    make_schedules(ql3_db, 3, prefix="later", shift_back_ms=0, cron="0 0 1 1 *")
    older = make_schedules(ql3_db, 1, prefix="older", shift_back_ms=60_000)
    with owner_conn(ql3_db) as conn:
        conn.execute("UPDATE ql3.trigger_schedules SET state = 'paused' WHERE id = %s", (due[3],))
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        first = repo.claim_due_schedules(command("a"), 2)
        second = repo.claim_due_schedules(command("b"), 16)
        third = repo.claim_due_schedules(command("c"), 16)
    assert next(claim.schedule_id for claim in first) == older[0]
    assert len(first) == 2
    taken = {claim.schedule_id for claim in first + second}
    assert taken == {older[0], *due[:3]}
    assert third == []


def test_claim_takes_over_only_after_expiry_by_database_time(ql3_db: Ql3Database) -> None:
    """A held claim is invisible to others until the database clock reaches its expiry."""
    make_schedules(ql3_db, 1)
    dsn = ql3_db.dsn("runtime")
    with PostgresScheduleRepository(dsn) as first, PostgresScheduleRepository(dsn) as second:
        (held,) = first.claim_due_schedules(command("a", lease_ms=1000), 1)
        assert second.claim_due_schedules(command("b"), 1) == [] or (
            db_now_ms(dsn) >= held.claim_expires_at_ms
        )
        wait_until(lambda: db_now_ms(dsn) >= held.claim_expires_at_ms, what="claim expiry")
        (taken,) = second.claim_due_schedules(command("b"), 1)
    assert taken.schedule_id == held.schedule_id
    assert taken.claim_acquired_at_ms >= held.claim_expires_at_ms
    assert taken.version == held.version + 1


def test_claim_walks_the_partial_due_index(ql3_db: Ql3Database) -> None:
    """The claim plan uses trigger_schedules_due, so idle schedules are never scanned."""
    make_schedules(ql3_db, 50, prefix="idle", shift_back_ms=0, cron="0 0 1 1 *")
    with owner_conn(ql3_db) as conn:
        conn.execute("ANALYZE ql3.trigger_schedules")
        sql = resources.files("ql3_cluster_postgres").joinpath("sql/claim_due_schedules.sql")
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            row[0]
            for row in conn.execute(
                "EXPLAIN " + sql.read_text(),
                _EXPLAIN_PARAMS,
            ).fetchall()
        )
    assert "trigger_schedules_due" in plan


_VERSIONS = "SELECT id, version FROM ql3.trigger_schedules"
_EXPLAIN_PARAMS = {
    "owner_id": "x",
    "claim_token": TOKEN,
    "lease_ms": 1000,
    "batch_limit": 16,
    "zone_rules_version": zone_rules_version(),
}
_CLAIM_COLUMNS = (
    "SELECT id, claim_owner_id, claim_token, claim_expires_at_ms, version, updated_at_ms"
    " FROM ql3.trigger_schedules"
)


def _due_scan_rows(db: Ql3Database) -> int:
    """Rows the claim's scan of trigger_schedules visits (EXPLAIN ANALYZE, rolled back)."""
    sql = resources.files("ql3_cluster_postgres").joinpath("sql/claim_due_schedules.sql")
    params = _EXPLAIN_PARAMS
    with owner_conn(db) as owner:
        owner.execute("ANALYZE ql3.trigger_schedules")
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        conn = repo._connection()  # the repository's own session settings apply
        conn.execute("BEGIN")
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql.read_text(), params).fetchone()
        conn.execute("ROLLBACK")
    assert row is not None
    scans = list(_scans_of(row[0][0]["Plan"], "s"))
    assert len(scans) == 1, scans
    (scan,) = scans
    indexes = {scan.get("Index Name")} | {c.get("Index Name") for c in scan.get("Plans", [])}
    assert "trigger_schedules_due" in indexes, scan
    return int(scan["Actual Rows"]) + int(scan.get("Rows Removed by Filter", 0))


def _scans_of(node: dict[str, Any], alias: str) -> Iterator[dict[str, Any]]:
    if node.get("Alias") == alias and "Scan" in node["Node Type"]:
        yield node
    for child in node.get("Plans", []):
        yield from _scans_of(child, alias)


def test_idle_schedules_cost_the_claim_nothing(make_ql3_db: Callable[..., Ql3Database]) -> None:
    """With 16 due schedules among 100 or 4 000 idle ones, the claim's scan visits 16 rows."""
    for idle in (100, 4000):
        db = make_ql3_db()
        make_schedules(db, 16, prefix="due")
        make_schedules(db, idle, prefix="idle", shift_back_ms=0, cron="0 0 1 1 *")
        assert _due_scan_rows(db) == 16, idle


def _update_probes(db: Ql3Database, batch: int) -> list[dict[str, Any]]:
    """Return the claim's scans of the rows it updates (alias `t`), EXPLAIN ANALYZE rolled back."""
    sql = resources.files("ql3_cluster_postgres").joinpath("sql/claim_due_schedules.sql")
    with owner_conn(db) as owner:
        owner.execute("ANALYZE ql3.trigger_schedules")
    with PostgresScheduleRepository(db.dsn("runtime")) as repo:
        conn = repo._connection()  # the repository's own session settings apply
        conn.execute("BEGIN")
        params = {**_EXPLAIN_PARAMS, "batch_limit": batch}
        row = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql.read_text(), params).fetchone()
        conn.execute("ROLLBACK")
    assert row is not None
    return list(_scans_of(row[0][0]["Plan"], "t"))


def test_the_claim_updates_its_rows_by_key_not_by_reading_the_table(
    ql3_db: Ql3Database,
) -> None:
    """All 600 schedules due, a batch of 128: the update visits the 128 claimed rows only.

    On a table this small a join with the claimed ids was planned as a hash join reading the
    whole primary key: the claim's cost grew with the number of schedules, not the batch.
    """
    make_schedules(ql3_db, 600, prefix="due")
    scans = _update_probes(ql3_db, 128)
    assert scans, "no scan of the updated rows in the plan"
    visited = sum(int(scan["Actual Rows"]) * int(scan["Actual Loops"]) for scan in scans)
    assert visited == 128, scans
