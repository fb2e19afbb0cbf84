"""Child-process entry: print every import between the modules of each package as JSON.

Run as `python -m ql3_import_audit._graph_worker PACKAGE...`. The graph is grimp's (the library
import-linter builds its contracts on) with `exclude_type_checking_imports=True`: grimp's parser
leaves out every import inside an `if TYPE_CHECKING:` or `if typing.TYPE_CHECKING:` block. Those
imports never run, so they cannot close a circle at import time (they are how an annotation names
a type from a module that imports this one).
"""

from __future__ import annotations

import json
import sys

import grimp


def edges(names: list[str]) -> list[dict[str, object]]:
    """Return each direct import inside one package: importer, imported and its line numbers."""
    graph = grimp.build_graph(
        *names, include_external_packages=False, exclude_type_checking_imports=True, cache_dir=None
    )
    found: list[dict[str, object]] = []
    for name in names:
        for importer in sorted({name, *graph.find_descendants(name)}):
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if imported.split(".", maxsplit=1)[0] != name:
                    continue
                details = graph.get_import_details(importer=importer, imported=imported)
                lines = sorted({int(detail["line_number"]) for detail in details})
                found.append({"importer": importer, "imported": imported, "line_numbers": lines})
    return found


if __name__ == "__main__":
    json.dump(edges(sys.argv[1:]), sys.stdout)
