"""QL3 import audit: package closure and rule zero over every package's src and tests."""

from __future__ import annotations

__all__: list[str] = []
