"""Bad input never reaches PostgreSQL: names and numbers are refused by name, nothing written.

The model bounds are pinned against the database's own CHECKs, so the two cannot drift: the
largest value the model accepts is stored, one past it is refused by the database too.
"""

from __future__ import annotations

import errno
import re
import subprocess
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest
from psycopg import errors as pg_errors
from pydantic import ValidationError
from ql3_cluster_postgres import (
    SCHEDULE_NAME_MAX_LENGTH,
    PostgresScheduleRepository,
    ScheduleAdmin,
    ScheduleSpec,
    WorkerIngress,
    verify_history,
)
from ql3_runtime_core import (
    EPOCH_MS_MAX,
    MISFIRE_GRACE_MS_MAX,
    PAYLOAD_MAX_BYTES,
    InvalidArgumentError,
    ScheduleDefinition,
    payload_text,
)
from repo_helpers import command, fetch

if TYPE_CHECKING:
    from collections.abc import Iterator

    from ql3_testkit import Ql3Database

HOURLY = ScheduleDefinition(cron="0 * * * *")
# Nobody listens on port 1: an argument checked after connecting would fail differently.
LIMIT_BOUND = re.escape("limit: must be within 1..100000")
LEASE_BOUND = re.escape("lease_ms: must be within 1000..60000")
UNREACHABLE = "host=127.0.0.1 port=1 dbname=nowhere user=nobody connect_timeout=2"


@pytest.fixture
def admin(ql3_db: Ql3Database) -> Iterator[ScheduleAdmin]:
    """Open a ScheduleAdmin connected as ql3_admin."""
    with ScheduleAdmin(ql3_db.dsn("admin")) as opened:
        yield opened


def _count_tasks(db: Ql3Database) -> int:
    return int(fetch(db.dsn("admin"), "SELECT count(*) FROM ql3.tasks")[0][0])


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("   ", "must not begin or end with whitespace"),
        (" nightly", "must not begin or end with whitespace"),
        ("nightly ", "must not begin or end with whitespace"),
        ("night\tly", "must be printable"),
        ("ring\x07", "must be printable"),
        ("two\nlines", "must be printable"),
        ("no\u00a0break", "must be printable"),
        ("zero\u200bwidth", "must be printable"),
        ("", "at least 1 character"),
        ("x" * (SCHEDULE_NAME_MAX_LENGTH + 1), "at most 200 characters"),
    ],
)
def test_bad_names_are_refused_naming_the_field_and_nothing_is_written(
    admin: ScheduleAdmin, ql3_db: Ql3Database, name: str, needle: str
) -> None:
    """A blank, padded, non-printable or too long name fails on `name` for add and apply alike."""
    with pytest.raises(ValidationError, match=needle) as added:
        admin.add_schedule(name, HOURLY)
    assert [error["loc"] for error in added.value.errors()] == [("name",)]
    with pytest.raises(ValidationError, match=needle):
        admin.apply_schedules([ScheduleSpec(name=name, definition=HOURLY)])
    # A spec built without validation is validated again before any write.
    unchecked = ScheduleSpec.model_construct(name=name, definition=HOURLY)
    with pytest.raises(ValidationError, match=needle):
        admin.apply_schedules([unchecked])
    assert _count_tasks(ql3_db) == 0


def test_names_people_write_are_kept_as_given(admin: ScheduleAdmin) -> None:
    """Inner spaces, punctuation, non-ASCII letters and the longest name are stored unchanged."""
    longest = "x" * SCHEDULE_NAME_MAX_LENGTH
    names = ["nightly backup", "report: EU/Paris [v2]", "größe-ß-日本", longest]
    report = admin.apply_schedules([ScheduleSpec(name=name, definition=HOURLY) for name in names])
    assert sorted(report.created) == sorted(names)
    assert sorted(record.name for record in admin.list_schedules()) == sorted(names)


def test_the_database_checks_agree_with_the_model_bounds(
    admin: ScheduleAdmin, ql3_db: Ql3Database
) -> None:
    """The model's largest grace and name are stored; one past either is refused by PostgreSQL."""
    widest = ScheduleDefinition(cron="0 * * * *", misfire_grace_ms=MISFIRE_GRACE_MS_MAX)
    record = admin.add_schedule("x" * SCHEDULE_NAME_MAX_LENGTH, widest)
    owner = ql3_db.dsn("owner")
    with pytest.raises(pg_errors.CheckViolation, match="trigger_schedules_grace_bound"):
        fetch(
            owner,
            "UPDATE ql3.trigger_schedules SET misfire_grace_ms = %s WHERE id = %s RETURNING id",
            (MISFIRE_GRACE_MS_MAX + 1, record.schedule_id),
        )
    with pytest.raises(pg_errors.CheckViolation, match="tasks_name_length"):
        fetch(
            owner,
            "UPDATE ql3.tasks SET name = %s WHERE id = %s RETURNING id",
            ("x" * (SCHEDULE_NAME_MAX_LENGTH + 1), record.task_id),
        )


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"misfire_grace_ms": 99_999_999_999_999_999_999}, "misfire_grace_ms"),
        ({"misfire_grace_ms": MISFIRE_GRACE_MS_MAX + 1}, "misfire_grace_ms"),
        ({"start_at_ms": -1}, "start_at_ms"),
        ({"end_at_ms": 2**63}, "end_at_ms"),
    ],
)
def test_numbers_out_of_bounds_never_reach_the_database(
    admin: ScheduleAdmin, ql3_db: Ql3Database, change: dict[str, Any], field: str
) -> None:
    """A grace or window end past its bound fails naming the field, not with a driver error."""
    with pytest.raises(ValidationError, match=f"{field}: must be within"):
        admin.add_schedule("x", ScheduleDefinition.model_validate({"cron": "* * * * *", **change}))
    # Built without validation, the definition is validated again before any write.
    unchecked = ScheduleDefinition.model_construct(**{**HOURLY.model_dump(), **change})
    with pytest.raises(ValidationError, match=f"{field}: must be within"):
        admin.add_schedule("x", unchecked)
    assert _count_tasks(ql3_db) == 0


def test_row_limits_and_leases_are_bounded_before_any_statement(ql3_db: Ql3Database) -> None:
    """A claim, take or overdue count with an absurd limit or lease is refused by argument name."""
    with PostgresScheduleRepository(ql3_db.dsn("runtime")) as repo:
        for limit in (0, 2**70):
            with pytest.raises(InvalidArgumentError, match=LIMIT_BOUND):
                repo.claim_round(command(), limit)
        with pytest.raises(InvalidArgumentError, match=LEASE_BOUND):
            repo.count_overdue_schedules(2**70)
        assert repo.count_overdue_schedules(30_000) == 0
    with WorkerIngress(ql3_db.dsn("worker_ingress")) as ingress:
        with pytest.raises(InvalidArgumentError, match=LIMIT_BOUND):
            ingress.take_attempts(worker_id="w", lease_token=uuid4(), lease_ms=30_000, limit=2**70)
        assert (
            ingress.take_attempts(worker_id="w", lease_token=uuid4(), lease_ms=30_000, limit=10)
            == []
        )
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        with pytest.raises(InvalidArgumentError, match=LEASE_BOUND):
            admin.status(lease_ms=2**70)
        assert admin.status().schedules == ()


@pytest.mark.parametrize(
    ("since_ms", "grace_ms", "argument"),
    [
        (-1, 0, "since_ms"),
        (EPOCH_MS_MAX + 1, 0, "since_ms"),
        (99_999_999_999_999_999_999, 0, "since_ms"),
        (None, -1, "stale_claim_grace_ms"),
        (None, MISFIRE_GRACE_MS_MAX + 1, "stale_claim_grace_ms"),
    ],
)
def test_verify_refuses_out_of_range_arguments_before_connecting(
    since_ms: int | None, grace_ms: int, argument: str
) -> None:
    """verify_history names a bad `since_ms` or grace without even trying the (dead) server."""
    with pytest.raises(InvalidArgumentError, match=f"{argument}: must be within"):
        verify_history(UNREACHABLE, since_ms=since_ms, stale_claim_grace_ms=grace_ms)


def test_verify_accepts_the_edges_of_its_range(ql3_db: Ql3Database) -> None:
    """`since_ms` 0 and EPOCH_MS_MAX are both valid scopes of an empty history."""
    for since in (0, EPOCH_MS_MAX):
        assert verify_history(ql3_db.dsn("admin"), since_ms=since).ok


def test_a_payload_every_command_can_receive_is_stored_and_a_larger_one_refused(
    admin: ScheduleAdmin, ql3_db: Ql3Database
) -> None:
    """Payloads are bounded at admin time by what a command's environment can carry.

    The largest accepted payload reaches /bin/sh intact in `QL3_TASK_PAYLOAD`; one byte more is
    refused naming the field and its size, and nothing is written. The bound exists because the
    kernel refuses to start a program given a 128 KiB environment string (E2BIG).
    """
    overhead = len(payload_text({"k": ""}))
    largest = {"k": "x" * (PAYLOAD_MAX_BYTES - overhead)}
    admin.add_schedule("fits", HOURLY, payload_template=largest)
    too_big = {"k": "x" * (PAYLOAD_MAX_BYTES - overhead + 1)}
    with pytest.raises(
        InvalidArgumentError, match=rf"payload_template: at most {PAYLOAD_MAX_BYTES}"
    ):
        admin.add_schedule("too-big", HOURLY, payload_template=too_big)
    assert _count_tasks(ql3_db) == 1
    text = payload_text(largest)
    check = f'test "${{#QL3_TASK_PAYLOAD}}" -eq {len(text)}'
    subprocess.run(["/bin/sh", "-c", check], env={"QL3_TASK_PAYLOAD": text}, check=True)
    with pytest.raises(OSError, match="Argument list too long") as refused:
        subprocess.run(["/bin/true"], env={"QL3_TASK_PAYLOAD": "x" * 131_072}, check=False)
    assert refused.value.errno == errno.E2BIG
