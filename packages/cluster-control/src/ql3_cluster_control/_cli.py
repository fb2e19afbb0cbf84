"""The `ql3` command line (placeholder until issue 5)."""

from __future__ import annotations


def main() -> None:
    """Run the `ql3` command line."""
