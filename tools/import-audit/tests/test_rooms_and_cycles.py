"""Rooms (subpackage layers) and import cycles: planted violations are reported, controls pass."""

from __future__ import annotations

from fix_trees import FIXTURES
from ql3_import_audit._audit import run_audit
from ql3_import_audit._contracts import contracts_ini, room_reason
from ql3_import_audit._cycles import cycles
from ql3_import_audit._layout import ROOMS, load_workspace

ROOMS_SRC = "packages/rooms-fixture/src/ql3_rooms_fixture"
CYCLES_SRC = "packages/runtime-core/src/ql3_runtime_core"


def _rendered(tree: str) -> set[tuple[str, int, str]]:
    findings, _ = run_audit(FIXTURES / tree)
    return {(finding.path, finding.line, finding.rule) for finding in findings}


def test_the_rooms_table_is_a_layers_contract_with_the_package_as_container() -> None:
    """The fixture package's ROOMS entry becomes one import-linter contract, layers top first."""
    workspace = load_workspace(FIXTURES / "rooms")
    ini = contracts_ini(list(workspace.packages))
    assert ROOMS["ql3_rooms_fixture"] == ("cli", "service | worker", "store")
    assert "containers = ql3_rooms_fixture\n" in ini
    assert "layers =\n    cli\n    service | worker\n    store\n" in ini


def test_a_lower_room_importing_a_higher_one_is_reported() -> None:
    """The bottom room importing the top one, and a room importing its sibling, are reported."""
    assert _rendered("rooms") == {
        (f"{ROOMS_SRC}/store/_report.py", 5, "room-import"),
        (f"{ROOMS_SRC}/service/_loop.py", 6, "room-import"),
    }


def test_rooms_importing_downwards_pass() -> None:
    """The control tree (cli > service, worker > store only) has no finding at all."""
    assert _rendered("rooms_clean") == set()


def test_room_reason_blames_only_the_hop_against_the_order() -> None:
    """Downward and same-room hops pass; upward and sibling hops name both rooms."""
    assert room_reason("ql3_rooms_fixture.cli._main", "ql3_rooms_fixture.service") is None
    assert room_reason("ql3_rooms_fixture.store._rows", "ql3_rooms_fixture.store") is None
    assert room_reason("ql3_rooms_fixture._errors", "ql3_rooms_fixture.cli") is None
    upward = room_reason("ql3_rooms_fixture.store._report", "ql3_rooms_fixture.cli")
    assert upward is not None
    assert upward.startswith("room store must not import higher room cli")
    sibling = room_reason("ql3_rooms_fixture.worker._run", "ql3_rooms_fixture.service")
    assert sibling is not None
    assert sibling.startswith("rooms worker and service are independent siblings")


def test_an_import_cycle_is_reported_once_with_its_path() -> None:
    """`_cron` -> `_fields` -> `_cron` (the back import inside a function) is one finding."""
    findings, _ = run_audit(FIXTURES / "cycles")
    assert [(f.path, f.line, f.rule) for f in findings] == [
        (f"{CYCLES_SRC}/_cron.py", 5, "import-cycle")
    ]
    assert findings[0].detail.startswith(
        "import cycle ql3_runtime_core._cron -> ql3_runtime_core._fields -> ql3_runtime_core._cron"
    )


def test_type_checking_imports_close_no_cycle() -> None:
    """Back imports under `if TYPE_CHECKING:` and `if typing.TYPE_CHECKING:` are not a cycle."""
    source = FIXTURES / "cycles_clean" / CYCLES_SRC
    assert "from ql3_runtime_core._cron import" in (source / "_fields.py").read_text("utf-8")
    assert "from ql3_runtime_core._cron import" in (source / "_zones.py").read_text("utf-8")
    assert _rendered("cycles_clean") == set()


def test_cycles_names_every_module_on_a_circle_once_per_distinct_cycle() -> None:
    """Two circles sharing a module give two cycles, each written from its smallest module."""
    graph = {
        "p.a": {"p.b"},
        "p.b": {"p.a", "p.c"},
        "p.c": {"p.d"},
        "p.d": {"p.b"},
        "p.e": {"p.a"},
    }
    assert cycles(graph) == [["p.a", "p.b"], ["p.b", "p.c", "p.d"]]
    assert cycles({"p.a": {"p.b"}, "p.b": {"p.c"}}) == []
    assert cycles({"p.a": {"p.a"}}) == [["p.a"]]
