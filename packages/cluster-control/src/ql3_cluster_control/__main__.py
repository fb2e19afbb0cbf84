"""`python -m ql3_cluster_control`: the `ql3` command line (the demo starts replicas this way)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
