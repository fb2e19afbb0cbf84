"""Trigger now under lost replies: each request is one manual Run, beside the cron series.

Real `ql3 schedule trigger` processes go through `WireFaultProxy`, armed before each request to
swallow the next COMMIT reply (the COMMIT reaches the server, the client's connection is reset),
while two `ql3 run` replicas admit an every-second series on the same database. For each request
a second `ql3 schedule trigger` with the same request id races the first, directly to the
server. The CLI must settle a lost reply from the database (DESIGN §6): after the durability
barrier it reads the request back by id and prints that Run; it sends the trigger again only if
the request is absent, so a request is never admitted twice.

Proved from the database, not from the CLI's word: the proxy counted each swallowed reply, the
request had no Run before it was sent, and afterwards exactly one (1 run : 1 attempt : 2 events),
the Run both CLIs printed. Running the command a third time finds it. The cron series stays exact
(cronsim, the test kit's oracle and `ql3 verify`): a manual Run fills no occurrence, and the
replicas' lateness bound is the cycle slack, since no fault touches them.
"""

from __future__ import annotations

import json
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from harness import SLACK, Bound, fetch, ql3_executable
from ql3_testkit import WireFaultProxy

if TYPE_CHECKING:
    from collections.abc import Callable

    from harness import Scenario

LEASE_MS = 2_000
REQUESTS = 4
REQUEST_RUNS_SQL = (
    "SELECT r.id, r.kind, (SELECT count(*) FROM ql3.attempts AS a WHERE a.run_id = r.id),"
    " (SELECT count(*) FROM ql3.events AS e WHERE e.run_id = r.id)"
    " FROM ql3.runs AS r WHERE r.request_id = %s"
)
NAME_SQL = (
    "SELECT t.name FROM ql3.trigger_schedules AS s JOIN ql3.tasks AS t ON t.id = s.task_id"
    " WHERE s.id = %s"
)


def _trigger(name: str, request_id: str, dsn: str) -> dict[str, Any]:
    """Run the real `ql3 schedule trigger --json`; return the Run it printed."""
    result = subprocess.run(
        [str(ql3_executable()), "schedule", "trigger", name, "--request-id", request_id,
         "--json", "--dsn", dsn],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, f"ql3 schedule trigger {request_id}: {result.stderr}"
    answer: dict[str, Any] = json.loads(result.stdout)
    return answer


def test_triggers_whose_replies_are_lost_admit_one_run_each(
    scenario: Callable[[str, str], Scenario],
) -> None:
    """Each request: reply swallowed, a direct twin racing it, a rerun: one Run, exact series."""
    run = scenario("trigger-lost-reply", "6")
    run.prepare()
    cluster = run.cluster
    assert cluster is not None
    proxy = WireFaultProxy(cluster.host, cluster.port).start()
    run.on_close(proxy.stop)
    run.replica(lease_ms=LEASE_MS)
    run.replica(lease_ms=LEASE_MS)
    run.wait_ready()
    schedule_id, *_ = run.add_schedules(2, window_s=12)
    ((name,),) = fetch(run.dsn(), NAME_SQL, (schedule_id,))
    proxied = run.dsn("admin", host="127.0.0.1", port=str(proxy.port))
    direct = run.dsn("admin")
    written_by_proxied = 0
    for n in range(REQUESTS):
        request_id = f"chaos-lost-reply-{n}"
        assert fetch(direct, REQUEST_RUNS_SQL, (request_id,)) == []
        dropped = proxy.commit_replies_dropped
        proxy.drop_next_commit_reply()
        with ThreadPoolExecutor(max_workers=2) as pool:
            through_proxy = pool.submit(_trigger, name, request_id, proxied)
            twin = pool.submit(_trigger, name, request_id, direct)
            answers = [through_proxy.result(), twin.result()]
        assert proxy.commit_replies_dropped == dropped + 1, (
            f"request {request_id}: the proxy swallowed no COMMIT reply\n{run.logs()}"
        )
        rows = fetch(direct, REQUEST_RUNS_SQL, (request_id,))
        assert len(rows) == 1, f"request {request_id}: {len(rows)} Runs: {rows}"
        ((run_id, kind, attempts, events),) = rows
        assert (kind, attempts, events) == ("manual", 1, 2), rows
        assert {answer["run_id"] for answer in answers} == {run_id}, answers
        # The proxied CLI lost its COMMIT reply: it always answers with the Run read back by
        # request id (`existed`). The twin answers `existed` false only if it wrote the Run.
        proxied_answer, twin_answer = answers
        assert proxied_answer["existed"] is True, answers
        written_by_proxied += twin_answer["existed"] is True
        rerun = _trigger(name, request_id, proxied)
        assert (rerun["run_id"], rerun["existed"]) == (run_id, True)
    run.fault(
        f"{REQUESTS} trigger COMMIT replies swallowed by WireFaultProxy (connection reset after"
        " the commit), each raced by a direct trigger of the same request id"
    )
    run.note(
        f"{REQUESTS} requests, {REQUESTS} manual Runs (1:1:2 each); the proxied CLI wrote"
        f" {written_by_proxied} of them (reply lost, settled by reading the request back), the"
        f" direct twin {REQUESTS - written_by_proxied} (the proxied one found it); every rerun"
        " found the same Run"
    )
    run.wait_exhausted(timeout_s=30)
    run.finish(bound=Bound.of(SLACK))
    run.evidence.verdict = (
        f"{REQUESTS} lost trigger replies, each request one manual Run, cron series exact"
    )
