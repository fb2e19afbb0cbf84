"""The replication-safety guard of the Coordinator service (DESIGN §13).

At every (re)connect the service hands the repository to `ReplicationGuard.check`, which reads the
node (`ServiceRepository.read_replication_state`): a standby is refused with
`NoWritableServerError` (the service retries it soon, a leader change is likely under way), so
nothing is ever claimed there. A primary's reading is published: another system identifier or
timeline than the last one is a failover (WARNING `replication.failover`, `ql3_failovers_total`);
standbys streaming without a synchronous one make replication unsafe (WARNING
`replication.unsafe` once per change, `ql3_replication_unsafe`, the `/healthz` detail), because an
admission acknowledged by this primary can then be lost at failover and admitted again.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, TypedDict

from ql3_cluster_postgres import NoWritableServerError
from ql3_runtime_core import log_event

if TYPE_CHECKING:
    from ql3_runtime_core import ReplicationState, ServiceRepository

    from ql3_cluster_control._metrics import CoordinatorMetrics, HealthState

__all__ = ["NodeFields", "ReplicationGuard", "node_fields"]

logger = logging.getLogger(__name__)


class ReplicationGuard:
    """Checks each node the service connects to; remembers the last primary seen (`node`)."""

    def __init__(self, metrics: CoordinatorMetrics, health: HealthState) -> None:
        self.metrics = metrics
        self.health = health
        self.node: ReplicationState | None = None

    def check(self, repository: ServiceRepository) -> None:
        """Read the node at (re)connect; refuse a standby, count a failover, report safety.

        Raises:
            NoWritableServerError: the node is in recovery; nothing is ever claimed there.

        """
        state = repository.read_replication_state()
        if state.in_recovery:
            msg = f"node {state.node} is in recovery (a standby); nothing is claimed there"
            raise NoWritableServerError(msg)
        self.observe(state)

    def observe(self, state: ReplicationState) -> None:
        """Publish a primary's reading; log and count a change of history (a failover)."""
        previous, self.node = self.node, state
        self.health.replication = state
        self.metrics.replication_unsafe.set(1 if state.unsafe else 0)
        self.metrics.timeline.set(state.timeline or 0)
        failover = previous is not None and state.changed_history(previous)
        if previous is not None and failover:
            self.metrics.failovers.inc()
            log_event(
                logger,
                logging.WARNING,
                "replication.failover",
                **node_fields(state),
                previous_node=previous.node,
                previous_system_identifier=previous.system_identifier,
                previous_timeline=previous.timeline,
            )
        was_unsafe = previous is not None and previous.unsafe and not failover
        if state.unsafe and not was_unsafe:
            log_event(
                logger,
                logging.WARNING,
                "replication.unsafe",
                **node_fields(state),
                detail=state.describe(),
            )
        elif was_unsafe and not state.unsafe:
            log_event(
                logger,
                logging.INFO,
                "replication.safe",
                **node_fields(state),
                detail=state.describe(),
            )


class NodeFields(TypedDict, total=False):
    """The log fields naming a node (typed, so they unpack into `log_event`'s keywords)."""

    node: str | None
    system_identifier: str
    timeline: int | None
    replication_mode: str
    replication_unsafe: bool


def node_fields(state: ReplicationState) -> NodeFields:
    """Return the log fields naming a node and its replication mode."""
    return {
        "node": state.node,
        "system_identifier": state.system_identifier,
        "timeline": state.timeline,
        "replication_mode": state.mode.value,
        "replication_unsafe": state.unsafe,
    }
