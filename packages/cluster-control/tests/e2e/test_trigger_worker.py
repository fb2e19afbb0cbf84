"""A manual Run executed by a real `ql3 worker` process, like any Run, with its own payload.

The schedule is paused (its cron series admits nothing): the trigger alone puts a Run in the
queue, the worker takes it, runs the schedule's command with the Run's payload in
`QL3_TASK_PAYLOAD`, and the history holds one manual Run : one attempt, verified clean.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fix_workers import events_of, wait_for_states
from ql3_cluster_postgres import ScheduleAdmin, verify_history
from ql3_runtime_core import ScheduleDefinition, TaskExecution

if TYPE_CHECKING:
    from fix_workers import Workers
    from ql3_testkit import Ql3Database


def test_a_worker_executes_a_manual_run_of_a_paused_schedule(
    ql3_db: Ql3Database, workers: Workers
) -> None:
    """Its payload reaches the command; admitted, queued, running, succeeded; verify passes."""
    execution = TaskExecution(command='echo "$QL3_TASK_PAYLOAD"')
    with ScheduleAdmin(ql3_db.dsn("admin")) as admin:
        admin.add_schedule(
            "nightly",
            ScheduleDefinition(cron="0 3 * * *"),
            execution=execution,
            payload_template={"from": "template"},
        )
        admin.pause("nightly")
        run = admin.trigger_run("nightly", "by-hand", payload={"from": "trigger"})
    workers.start("w1", ql3_db)
    (attempt,) = wait_for_states(ql3_db, run.run_id, ["succeeded"])
    assert (attempt["exit_code"], attempt["worker_id"]) == (0, "w1")
    assert attempt["output_tail"] == '{"from":"trigger"}\n'
    assert [event["kind"] for event in events_of(ql3_db, run.run_id)] == [
        "run.admitted",
        "attempt.queued",
        "attempt.running",
        "attempt.succeeded",
    ]
    report = verify_history(ql3_db.dsn("admin"))
    assert report.ok, report.lines()
    assert (report.runs, report.manual_runs) == (0, 1)
