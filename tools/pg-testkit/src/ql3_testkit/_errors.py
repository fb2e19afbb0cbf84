"""The error the test kit raises for what only the kit does (faketime, standbys, the proxy).

A failure to find, initialise or start the server itself comes from the product's
`PrivateServer` as `ql3_cluster_postgres.PrivateServerError`, which this class extends: one
`except PrivateServerError` catches both.
"""

from __future__ import annotations

from ql3_cluster_postgres import PrivateServerError

__all__ = ["ThrowawayClusterError"]


class ThrowawayClusterError(PrivateServerError):
    """Raised when libfaketime, a standby, a promotion or the fault proxy cannot do its job."""

    __module__ = "ql3_testkit"
