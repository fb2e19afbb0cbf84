"""Command line of the import audit (placeholder)."""

from __future__ import annotations


def main() -> None:
    """Run the audit."""
