"""QL3 benchmarks (DESIGN §14): admission throughput, lateness, claim scale and footprint.

Run with `uv run --group bench python -m bench all` (add `--quick` for a smoke run). Every figure
is read back from a throwaway PostgreSQL started for the run; nothing here is part of a test
session. Measuring uses only `time.perf_counter()`/`time.monotonic()`; every time value that is
reported or compared is the database's (rule zero).
"""

from __future__ import annotations

__all__: list[str] = []
