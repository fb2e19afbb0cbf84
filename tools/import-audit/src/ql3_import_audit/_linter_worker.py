"""Child-process entry: run import-linter on an INI file and print every offending import as JSON.

Run as `python -m ql3_import_audit._linter_worker CONFIG`. import-linter's contract checks keep
each direct import they blame as a dict with `importer`, `imported` and `line_numbers` somewhere in
their metadata (the layout differs per contract type); collecting those dicts generically keeps
this independent of each contract's report shape.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from importlinter import configuration
from importlinter.application import use_cases

if TYPE_CHECKING:
    from collections.abc import Iterator

_LINK_KEYS = frozenset({"importer", "imported", "line_numbers"})


def _links(value: object) -> Iterator[dict[str, object]]:
    if isinstance(value, dict):
        if value.keys() >= _LINK_KEYS:
            yield {key: value[key] for key in _LINK_KEYS}
        for item in value.values():
            yield from _links(item)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _links(item)


def main(config: str) -> None:
    """Print the JSON list of blamed imports for every broken contract in `config`."""
    configuration.configure()
    report = use_cases.create_report(use_cases.read_user_options(config), cache_dir=None)
    blamed = [
        {**link, "contract": str(getattr(contract, "type_name", ""))}
        for contract, check in report.get_contracts_and_checks()
        if not check.kept
        for link in _links(check.metadata)
    ]
    if report.invalid_contract_options:
        sys.exit(f"invalid import-linter contracts: {report.invalid_contract_options}")
    json.dump(blamed, sys.stdout, default=list)


if __name__ == "__main__":
    main(sys.argv[1])
