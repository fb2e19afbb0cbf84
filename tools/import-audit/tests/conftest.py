"""pytest configuration for the import audit's own tests."""

from __future__ import annotations

# The fixture trees are miniature repositories with planted violations, audited as data; their
# `test_*.py` files must never be collected or imported as tests of the audit itself.
collect_ignore = ["fixtures"]

# `pytester` runs the optional clock guard in a separate pytest process over planted test files.
pytest_plugins = ["pytester"]
