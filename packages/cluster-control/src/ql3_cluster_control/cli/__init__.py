"""The `ql3` command line: the app, its verbs by group, their shared options, their tables.

Owns: the typer app and `main` (`_app`), what every verb shares (`_common`), one module per
group of verbs, the tables printed for people (`_tables`) and database times as text
(`_time_text`). It is the top room: it may import every other room of the package (the
Coordinator's service and the worker for `ql3 run` / `ql3 worker`, the demo for `ql3 demo`) and
the base modules, and ql3-cluster-postgres's public API for everything that reads or writes the
database (it speaks no SQL). Nothing in the package imports it except the package's `__init__`.

What other rooms and the package's `__init__` use is re-exported here: the modules stay private
to the room (the import audit refuses an import of a room's `_module` from outside it).
"""

from __future__ import annotations

from ._app import app, main

__all__ = [
    "app",
    "main",
]
