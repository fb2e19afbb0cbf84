"""Kept threads: a job runs on an idle kept thread, a new one starts only when all are busy."""

from __future__ import annotations

import threading

from fix_db import wait_for
from ql3_cluster_control.worker._threads import ReusedThreads

_WAIT_S = 10.0


def _all_idle(threads: ReusedThreads) -> None:
    """Wait until every kept thread is back waiting for a job."""
    wait_for(
        lambda: threads.idle == threads.started, timeout_s=_WAIT_S, what="every kept thread idle"
    )


def _run_and_wait(threads: ReusedThreads, name: str) -> str:
    """Run one job that records its thread's name; wait until it ran and its thread is idle."""
    seen: list[str] = []
    done = threading.Event()

    def work() -> None:
        seen.append(threading.current_thread().name)
        done.set()

    threads.submit(name, work)
    assert done.wait(_WAIT_S)
    _all_idle(threads)
    return seen[0]


def test_jobs_one_after_another_share_one_thread() -> None:
    """Ten jobs in turn start one thread; each runs under its own name."""
    threads = ReusedThreads()
    names = [_run_and_wait(threads, f"ql3-attempt-{i}") for i in range(10)]
    assert names == [f"ql3-attempt-{i}" for i in range(10)]
    assert threads.started == 1


def test_a_busy_thread_makes_a_new_one_start() -> None:
    """Three jobs held at once need three threads; after they end, a fourth reuses one."""
    threads = ReusedThreads()
    release = threading.Event()
    running = threading.Barrier(4, timeout=_WAIT_S)
    ended = threading.Semaphore(0)

    def held() -> None:
        running.wait()
        release.wait(_WAIT_S)
        ended.release()

    for index in range(3):
        threads.submit(f"held-{index}", held)
    running.wait()  # all three run at the same time: three threads
    assert threads.started == 3
    release.set()
    for _ in range(3):
        assert ended.acquire(timeout=_WAIT_S)
    _all_idle(threads)
    assert _run_and_wait(threads, "after") == "after"
    assert threads.started == 3


def test_a_job_that_raises_keeps_its_thread() -> None:
    """What escapes a job is logged; the thread serves the next job."""
    threads = ReusedThreads()

    def boom() -> None:
        raise RuntimeError("escaped")

    threads.submit("boom", boom)
    _all_idle(threads)
    assert threads.idle == 1
    assert _run_and_wait(threads, "next") == "next"
    assert threads.started == 1
