"""The tables `ql3` prints for people hold one line per schedule, whatever a stored name holds."""

from __future__ import annotations

import pytest
from ql3_cluster_control.cli._tables import cell, print_table, records_table
from ql3_cluster_postgres import ScheduleRecord
from ql3_runtime_core import ScheduleDefinition, ScheduleState

# Names PostgreSQL accepts (1..200 characters) but ScheduleSpec now refuses, as a row written
# before that rule or by hand may still hold them.
LEGACY_NAMES = ["tab\there", "bell\x07", "two\nlines", "[red]markup[/]", "[/]", "   "]
# The longest cron the database stores (1 000 characters).
LONG_CRON = ",".join(["0"] * 495 + ["10"]) + " * * * *"


def _record(name: str, index: int, cron: str = "0 * * * *") -> ScheduleRecord:
    return ScheduleRecord(
        schedule_id=index,
        task_id=index,
        name=name,
        definition=ScheduleDefinition(cron=cron),
        cron=cron,
        timezone="UTC",
        state=ScheduleState.ACTIVE,
        next_due_at_ms=3_600_000,
        claim_owner_id=None,
        claim_expires_at_ms=None,
        version=0,
        updated_at_ms=0,
        created_at_ms=0,
    )


def test_schedule_list_keeps_one_line_per_schedule_for_any_stored_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Control characters, markup and the longest name and cron never split or lose a row."""
    records = [_record(name, index) for index, name in enumerate(LEGACY_NAMES, 1)]
    records.append(_record("x" * 200, 99, LONG_CRON))
    print_table(records_table(records))
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(records)
    assert "x" * 200 in lines[-1]
    assert LONG_CRON in lines[-1]
    body = "\n".join(lines[1:])
    for shown in ("tab\\there", "bell\\x07", "two\\nlines", "[red]markup[/]", "[/]"):
        assert shown in body
    assert "\x07" not in body
    assert "\t" not in body


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain name", "plain name"),
        ("größe 日本", "größe 日本"),
        ("a\tb", "a\\tb"),
        ("[bold]x", "\\[bold]x"),
        ("zero\u200bwidth", "zero\\u200bwidth"),
    ],
)
def test_cell_shows_escapes_and_never_markup(text: str, shown: str) -> None:
    """Printable text is kept; control characters become escapes; `[` cannot start markup."""
    assert cell(text) == shown
