"""pytest configuration for the test kit's own tests: its database fixtures."""

from __future__ import annotations

pytest_plugins = ["ql3_testkit.fixtures"]
