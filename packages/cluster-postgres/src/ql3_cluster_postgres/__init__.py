"""QL3 on PostgreSQL: migrations, roles, the fenced repository and throwaway clusters."""

from __future__ import annotations

from importlib.metadata import version as _version

__version__ = _version("ql3-cluster-postgres")

__all__ = ["__version__"]
