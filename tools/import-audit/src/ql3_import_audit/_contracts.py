"""Run import-linter's `layers`, `forbidden` and `private_modules` contracts over the src trees.

Two kinds of `layers` contract: one between the wheels (`_layout.LAYERS`), and one per package
with rooms (`_layout.ROOMS`), whose layers are the package's subpackages with the package as the
contract's `containers` (so the layers are named relative to it and ` | ` marks independent
siblings, as import-linter spells them).

The contracts are generated per audited root (only for the packages that exist there) into a
temporary INI file, so the repository's root pyproject carries no import-linter configuration.
import-linter runs in a child interpreter whose PYTHONPATH puts the audited `src/` folders first
(`_child`).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from ._child import importable, run_child
from ._findings import RULE_DIRECTION, RULE_EDGE, RULE_ROOM, Finding
from ._imports import forbidden_reason
from ._layout import FORBIDDEN_EXTERNAL, LAYERS, ROOM_SIBLINGS, ROOMS, Package, Workspace

if TYPE_CHECKING:
    from collections.abc import Sequence


class _Link(TypedDict):
    """One import blamed by a broken contract, as `_linter_worker` prints it."""

    importer: str
    imported: str
    line_numbers: list[int]
    contract: str


_CONTRACT_TYPES = (
    "forbidden: importlinter.contracts.forbidden.ForbiddenContract",
    "layers: importlinter.contracts.layers.LayersContract",
    "private_modules: importlinter.contracts.private_modules.PrivateModulesContract",
)


def _lines(values: Sequence[str]) -> str:
    return "".join(f"\n    {value}" for value in values)


def _room_index(package: str, module: str, rooms: dict[str, tuple[str, ...]]) -> tuple[int, str]:
    """Return (layer index from the top, room name) of `module`, or (-1, "") outside any room."""
    parts = module.split(".")
    if len(parts) < 2:  # noqa: PLR2004 (the package itself holds no room)
        return -1, ""
    for index, layer in enumerate(rooms.get(package, ())):
        if parts[1] in (room.strip() for room in layer.split(ROOM_SIBLINGS.strip())):
            return index, parts[1]
    return -1, ""


def room_reason(
    importer: str, imported: str, rooms: dict[str, tuple[str, ...]] = ROOMS
) -> str | None:
    """Return why module `importer` may not import module `imported` of its own package, or None.

    A room imports only rooms below it; independent siblings (one layer, ` | `) not each other.
    Only the hop that breaks the order is blamed: import-linter also reports the allowed hops of
    an indirect chain, and those pass here.
    """
    package = importer.split(".", maxsplit=1)[0]
    if imported.split(".", maxsplit=1)[0] != package:
        return None
    (low, low_room), (high, high_room) = (
        _room_index(package, importer, rooms),
        _room_index(package, imported, rooms),
    )
    if low < 0 or high < 0 or low_room == high_room:
        return None
    order = " > ".join(rooms[package])
    if low > high:
        return (
            f"room {low_room} must not import higher room {high_room}"
            f" ({package} rooms, top to bottom: {order})"
        )
    if low == high:
        return (
            f"rooms {low_room} and {high_room} are independent siblings"
            f" ({package} rooms, top to bottom: {order})"
        )
    return None


def existing_rooms(package: Package) -> tuple[str, ...]:
    """Return the package's `ROOMS` layers, keeping only the rooms its `src/` tree holds.

    A fixture tree holds a package without its rooms, and import-linter refuses a layer that
    does not exist; the real tree's rooms are all checked to exist by its own test
    (`test_real_tree.py`), so a renamed room cannot drop out of its contract unnoticed.
    """
    folder = package.src / package.import_name
    layers = (
        " | ".join(room for room in layer.split(" | ") if (folder / room / "__init__.py").is_file())
        for layer in ROOMS.get(package.import_name, ())
    )
    return tuple(layer for layer in layers if layer)


def _room_sections(packages: list[Package]) -> list[str]:
    """Return one `layers` contract per package with rooms, the package as its container."""
    sections: list[str] = []
    for package in packages:
        rooms = existing_rooms(package)
        if not rooms:
            continue
        name = package.import_name
        sections += [
            "",
            f"[importlinter:contract:rooms-{name}]",
            f"name = rooms of {name} import downwards only",
            "type = layers",
            f"containers = {name}",
            f"layers ={_lines(rooms)}",
        ]
    return sections


def contracts_ini(packages: list[Package]) -> str:
    """Return the import-linter INI configuration for the given (existing) packages."""
    names = [package.import_name for package in packages]
    kits = [package.import_name for package in packages if package.test_kit]
    sections = [
        "[importlinter]",
        f"root_packages ={_lines(names)}",
        "include_external_packages = True",
        f"contract_types ={_lines(_CONTRACT_TYPES)}",
        "",
        "[importlinter:contract:private]",
        "name = private modules stay inside their package",
        "type = private_modules",
        f"packages_with_private_modules ={_lines(names)}",
        "unmatched_ignore_imports_alerting = none",
    ]
    layered = [name for name in reversed(LAYERS) if name in names]
    if len(layered) > 1:
        sections += [
            "",
            "[importlinter:contract:layers]",
            "name = higher layers import lower layers only",
            "type = layers",
            f"layers ={_lines(layered)}",
        ]
    for source, forbidden in sorted(FORBIDDEN_EXTERNAL.items()):
        if source in names:
            sections += [
                "",
                f"[importlinter:contract:forbidden-{source}]",
                f"name = {source} imports no driver",
                "type = forbidden",
                f"source_modules = {source}",
                f"forbidden_modules ={_lines(forbidden)}",
            ]
    product = [name for name in LAYERS if name in names]
    if kits and product:
        sections += [
            "",
            "[importlinter:contract:forbidden-test-kits]",
            "name = product wheels never import the test kit",
            "type = forbidden",
            f"source_modules ={_lines(product)}",
            f"forbidden_modules ={_lines(kits)}",
        ]
    sections += _room_sections(packages)
    return "\n".join(sections) + "\n"


def _module_file(package: Package, module: str) -> Path:
    base = package.src.joinpath(*module.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def _finding(workspace: Workspace, packages: list[Package], link: _Link) -> list[Finding]:
    importer, imported = link["importer"], link["imported"]
    owner = next(p for p in packages if importer.split(".", maxsplit=1)[0] == p.import_name)
    path = workspace.relative(_module_file(owner, importer))
    lines = link["line_numbers"]
    room = room_reason(importer, imported)
    if link["contract"] == "private_modules":
        rule = RULE_EDGE
        detail = f"{imported} is private to its package (import-linter)"
    elif room is not None:
        rule, detail = RULE_ROOM, f"{importer} must not import {imported}: {room} (import-linter)"
    elif importer.split(".", maxsplit=1)[0] == imported.split(".", maxsplit=1)[0]:
        # A hop inside one package that keeps the room order (part of a longer chain).
        return []
    else:
        reason = forbidden_reason(
            importer.split(".", maxsplit=1)[0],
            imported.split(".", maxsplit=1)[0],
            workspace.test_kits,
        )
        if reason is None:
            # A hop inside a longer chain that is itself allowed; the offending hop is reported.
            return []
        rule, detail = RULE_DIRECTION, f"{reason} (import-linter)"
    return [Finding(path, line, rule, detail) for line in lines]


def check_contracts(workspace: Workspace) -> list[Finding]:
    """Return the findings of import-linter's contracts over every package's `src`."""
    packages = importable(workspace.packages)
    if not packages:
        return []
    with tempfile.TemporaryDirectory(prefix="ql3-import-audit-") as tmp:
        config = Path(tmp) / "importlinter.ini"
        config.write_text(contracts_ini(packages), encoding="utf-8")
        worker = "ql3_import_audit._linter_worker"
        output = run_child(worker, packages, Path(tmp), str(config), tool="import-linter")
    links: list[_Link] = json.loads(output)
    return [finding for link in links for finding in _finding(workspace, packages, link)]
