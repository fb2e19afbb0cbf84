"""QL3 import audit: the package closure (DESIGN §15) and rule zero (DESIGN §1) over src and tests.

Run `ql3-import-audit [--root PATH]` from the repository root. Every finding prints as
`file:line: rule: detail` (paths relative to the root), then one summary line. Exit status: 0 clean,
1 on any finding, 2 on a usage error or when a wrapped tool cannot run (or a file does not parse).

Rules, and who enforces them (the well-kept tools first; the AST passes add only what they miss):

- `forbidden-direction`: layers ql3_cluster_control > ql3_cluster_postgres > ql3_runtime_core,
  runtime-core never imports psycopg / psycopg_pool, and no product src imports the test kit
  (`_layout.TEST_KITS`, tools/pg-testkit) nor does a product pyproject declare it as a dependency:
  tests may import it, listed in their package's `[dependency-groups] test`. import-linter
  `layers` + `forbidden` over src; the AST pass over tests (not packages, so import-linter cannot
  see them) and src; the declarations are read from each pyproject.
- `edge-import`: a sibling's submodule or `_private` name, including `import x as y; y._z` and
  `importlib.import_module("x._z")`. import-linter `private_modules` over src; the AST pass over src
  and tests. Decision: a package's own tests MAY import its own private modules (they test the
  implementation); they see siblings only through the sibling's `__all__`.
- `room-import`: a package's rooms (subpackages, `_layout.ROOMS`, layered top to bottom, ` | `
  for independent siblings) import only rooms below them. import-linter `layers` contracts with
  the package as `containers`, one per package with rooms.
- `import-cycle`: no import circle among the modules of one package's src (lazy imports inside
  functions included, imports under `if TYPE_CHECKING:` left out: they never run). grimp's graph,
  built in a child process (`_graph_worker`); one finding per distinct shortest cycle (`_cycles`).
- `undeclared-dependency`: deptry DEP001/DEP003/DEP004 per package. src against the package's
  `[project.dependencies]` (and extras); tests against those plus the package itself, the root
  `[dependency-groups] test` list and the package's own `test` group (the test kit); helper
  modules in the tests folder count as first party. The test kit is audited like a package.
- `unused-dependency`: deptry DEP002 over src, reported on the declaring pyproject line. Declared
  but never imported on purpose: `_deptry.NOT_IMPORTED_ON_PURPOSE`, each with its reason.
- `rule-zero`: node wall-clock use in package src and tests, `bench/`, `chaos/` and `tools/`. ruff
  TID251 with the root pyproject's banned-api list (merged over a built-in floor) for the direct
  forms; an AST data-flow pass (`_clock` over `_flow`, `_values`, `_bindings`, `_binding_calls`,
  `_scopes`) for what does not match by name: import, star-import and assignment aliases (chains,
  tuples, walrus, attributes, containers, `functools.partial`, parameters and return values, names
  imported from another audited module), datetime subclasses calling `now` / `utcnow` / `today` /
  `fromtimestamp()` through the class, `cls`, `self`, `type(self)` or `super()`, `getattr` / `vars`
  / `__dict__` / `sys.modules` / module loaders, clock functions passed as values,
  `clock_gettime(CLOCK_REALTIME)` and `localtime()`, `gmtime()`, `ctime()`, `asctime()`,
  `strftime(fmt)` without a time argument. `time.monotonic()` and `time.perf_counter()` stay
  allowed. Optional at run time: `pytest -p ql3_import_audit.clock_guard` fails a test whose own
  code calls a wall clock (it also sees `exec` and computed names; see `clock_guard`).

`tools/import-audit/tests/fixtures/` holds miniature trees with planted violations; they are never
audited as part of the real tree.
"""

from __future__ import annotations

__all__: list[str] = []
