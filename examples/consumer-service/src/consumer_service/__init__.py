"""Example consuming service: sends "invoices" for each Run of a QL3 schedule, exactly once.

It depends only on the published `ql3-cluster-control` wheel. The schedule (`invoices`, no
command: a Python task) is created by an operator with `ql3 schedule add`, a `ql3 run`
Coordinator admits its occurrences, and this service's `Worker` executes them.
"""

from __future__ import annotations

from .service import TASK_NAME, build_worker, deliver, main

__all__ = ["TASK_NAME", "build_worker", "deliver", "main"]
