"""QL3 cluster control: the Coordinator daemon, its configuration, CLI, logs, metrics and demo."""

from __future__ import annotations

from importlib.metadata import version as _version

__version__ = _version("ql3-cluster-control")

__all__ = ["__version__"]
