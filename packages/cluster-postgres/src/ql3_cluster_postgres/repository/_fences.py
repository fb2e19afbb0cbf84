"""The exact-claim fence of a claim, in the shapes the statements take it (DESIGN §5).

A claim stands only while all six columns on its row are what the claim read: the commit, the
release and the quarantine statements fence on exactly these, so they are built in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ql3_runtime_core import ClusterScheduleClaim

    from ql3_cluster_postgres._rows import ClaimedRow

__all__ = ["ClaimKey", "Fence", "claim_fence", "claim_key", "claim_params", "row_fence"]

ClaimKey = tuple[int, UUID, int]
# The exact-claim fence of one row: id, owner, token, version, acquired at, expires at.
Fence = tuple[int, str, UUID, int, int, int]


def claim_key(claim: ClusterScheduleClaim) -> ClaimKey:
    """Return what identifies one claim of one schedule version (the key of its ctid)."""
    return (claim.schedule_id, claim.claim_token, claim.version)


def claim_fence(claim: ClusterScheduleClaim) -> Fence:
    """Return the exact-claim fence a claim holds."""
    return (
        claim.schedule_id,
        claim.owner_id,
        claim.claim_token,
        claim.version,
        claim.claim_acquired_at_ms,
        claim.claim_expires_at_ms,
    )


def row_fence(row: ClaimedRow) -> Fence:
    """Return the exact-claim fence of a claimed row, whatever else it holds."""
    return (
        row.schedule_id,
        row.owner_id,
        row.claim_token,
        row.version,
        row.claim_acquired_at_ms,
        row.claim_expires_at_ms,
    )


def claim_params(claims: Sequence[ClusterScheduleClaim]) -> dict[str, Any]:
    """Return the exact-claim fence columns as arrays (commit and release both fence on them)."""
    return {
        "schedule_ids": [claim.schedule_id for claim in claims],
        "owner_ids": [claim.owner_id for claim in claims],
        "claim_tokens": [claim.claim_token for claim in claims],
        "versions": [claim.version for claim in claims],
        "acquired_ms": [claim.claim_acquired_at_ms for claim in claims],
        "expires_ms": [claim.claim_expires_at_ms for claim in claims],
    }
