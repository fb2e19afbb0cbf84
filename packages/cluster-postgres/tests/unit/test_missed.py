"""`_missed.record_missed`: which occurrences a caller hands over, and when it hands none.

The database side (the probe, the re-check, the UNIQUE key) is tested against PostgreSQL in
`integration/test_alerts_missed.py`; here the probe rows are built by hand, and `record` is a
recorder that answers as the database would for what it was given.
"""

from __future__ import annotations

from typing import Any

from ql3_cluster_postgres._missed import MISSED_PER_CALL, record_missed
from ql3_runtime_core import wheel_zone_rules

RULES = wheel_zone_rules()
CURSOR = 1_800_000_000_000  # a whole second (epoch ms)


def _overdue(**changes: Any) -> dict[str, Any]:
    row = {
        "alert_id": None,
        "kind": "overdue",
        "schedule_id": 7,
        "subject_key": None,
        "cursor_ms": CURSOR,
        "after_ms": CURSOR,
        "bound_ms": CURSOR + 5_500,
        "cron": "* * * * * *",
        "timezone": "UTC",
        "misfire_policy": "fire_once",
        "misfire_grace_ms": 0,
        "start_at_ms": None,
        "end_at_ms": None,
        "zone_rules_version": RULES.version,
    }
    return {**row, **changes}


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def __call__(self, params: Any) -> list[dict[str, Any]]:
        self.calls.append(dict(params))
        return [
            {"alert_id": 100 + i, "kind": "missed", "schedule_id": 7, "subject_key": at}
            for i, at in enumerate(params["occurrences"])
        ]


def test_the_occurrences_after_the_last_alerted_up_to_the_bound_are_handed_over() -> None:
    """Seconds after `after_ms` up to `bound_ms`, with the cursor and version the probe read."""
    cursor_alert = {"alert_id": 1, "kind": "missed", "schedule_id": 7, "subject_key": CURSOR}
    recorder = _Recorder()
    recorded = record_missed([cursor_alert, _overdue()], lambda _: RULES, recorder)
    seconds = [CURSOR + k * 1000 for k in range(1, 6)]
    assert recorder.calls == [
        {
            "schedule_id": 7,
            "cursor_ms": CURSOR,
            "zone_rules_version": RULES.version,
            "occurrences": seconds,
        }
    ]
    assert [alert.subject_key for alert in recorded] == [CURSOR, *seconds]


def test_other_zone_rules_or_none_leave_only_the_cursors_alert() -> None:
    """A caller whose rules are not the recorded version computes nothing."""
    recorder = _Recorder()
    assert record_missed([_overdue()], lambda _: None, recorder) == []
    assert record_missed([_overdue(zone_rules_version="1999z")], lambda _: RULES, recorder) == []
    assert record_missed([_overdue(zone_rules_version=None)], lambda _: RULES, recorder) == []
    assert recorder.calls == []


def test_the_window_end_the_cap_and_an_unreadable_definition() -> None:
    """No occurrence past end_at_ms; at most MISSED_PER_CALL; a bad cron is skipped, logged."""
    recorder = _Recorder()
    record_missed([_overdue(end_at_ms=CURSOR + 2_000)], lambda _: RULES, recorder)
    assert recorder.calls[-1]["occurrences"] == [CURSOR + 1000, CURSOR + 2000]
    long_outage = _overdue(bound_ms=CURSOR + 5_000_000)
    record_missed([long_outage], lambda _: RULES, recorder)
    handed = recorder.calls[-1]["occurrences"]
    assert len(handed) == MISSED_PER_CALL
    assert handed[-1] == CURSOR + MISSED_PER_CALL * 1000
    calls = len(recorder.calls)
    assert record_missed([_overdue(cron="61 * * * * *")], lambda _: RULES, recorder) == []
    assert record_missed([_overdue(after_ms=CURSOR + 5_500)], lambda _: RULES, recorder) == []
    assert len(recorder.calls) == calls


def test_one_call_hands_over_at_most_the_cap_over_all_schedules_oldest_first() -> None:
    """Two schedules 800 s behind: 800 of the first, 200 of the second; the rest next call."""
    recorder = _Recorder()
    first = _overdue(schedule_id=7, bound_ms=CURSOR + 800_000)
    second = _overdue(schedule_id=8, bound_ms=CURSOR + 800_000)
    third = _overdue(schedule_id=9, bound_ms=CURSOR + 800_000)
    record_missed([first, second, third], lambda _: RULES, recorder)
    handed = [(call["schedule_id"], len(call["occurrences"])) for call in recorder.calls]
    assert handed == [(7, 800), (8, MISSED_PER_CALL - 800)]
