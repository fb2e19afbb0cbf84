"""The migration tests' copies of the shipped files, cut back to an earlier schema."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path


def keep_up_to(source: Path, version: int) -> None:
    """Cut the copy `source` back to schema `version`: delete every later migration file.

    Every later file goes, not only the next one: a later migration may read what an earlier
    one it follows adds, so a copy holding a gap would not apply.
    """
    for path in source.glob("*.sql"):
        if int(path.name[:4]) > version:
            path.unlink()
