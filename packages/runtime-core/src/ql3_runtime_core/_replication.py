"""What a replica knows of the database node it talks to: role, history and replication mode.

QL3 has no leader of its own, so it is exactly as durable as the PostgreSQL cluster under it. An
admission acknowledged by a primary that streams to standbys *asynchronously* can vanish at
failover (the promoted standby never received it), and an occurrence could then be admitted a
second time by the new primary. The service reads a `ReplicationState` at every (re)connect and
reports `replication: unsafe` when commits do not wait for a synchronous standby (DESIGN §13).

A node is identified by its system identifier (one per `initdb`, shared by its physical standbys)
and its timeline (incremented by every promotion): either changing between two connections means
the replica now talks to another history, a failover.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, computed_field

__all__ = ["ReplicationMode", "ReplicationState"]


class ReplicationMode(StrEnum):
    """How a node's commits reach standbys.

    - `standby`: the node is in recovery; nothing is claimed or committed there.
    - `none`: a primary no standby streams from; a failover has no target to lose data to.
    - `synchronous`: standbys stream and each commit waits for a synchronous standby (safe).
    - `asynchronous`: standbys stream but commits do not wait for one: an acknowledged
      admission can be lost at failover (unsafe).
    """

    STANDBY = "standby"
    NONE = "none"
    SYNCHRONOUS = "synchronous"
    ASYNCHRONOUS = "asynchronous"


class ReplicationState(BaseModel):
    """One reading of the node: where it is, its history, and how commits reach standbys.

    `host`/`port` are the server's own address (None over a Unix socket). `sync_standbys` is how
    many standbys the node reports as synchronous; None when the reading role may not see it
    (it needs `pg_read_all_stats`), in which case the settings alone decide the mode.
    `mode`, `unsafe` and `node` are derived, and part of the JSON dump (`ql3 status --json`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str | None
    port: int | None
    system_identifier: str
    timeline: int | None
    in_recovery: bool
    standbys: int
    commits_wait_for_standby: bool
    synchronous_standby_names: str
    synchronous_commit: str
    sync_standbys: int | None = None

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def mode(self) -> ReplicationMode:
        """Classify the node (see `ReplicationMode`)."""
        if self.in_recovery:
            return ReplicationMode.STANDBY
        if self.standbys == 0:
            return ReplicationMode.NONE
        if self.commits_wait_for_standby:
            return ReplicationMode.SYNCHRONOUS
        return ReplicationMode.ASYNCHRONOUS

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def unsafe(self) -> bool:
        """True when an acknowledged admission can be lost at failover (asynchronous mode)."""
        return self.mode is ReplicationMode.ASYNCHRONOUS

    @computed_field  # type: ignore[prop-decorator]  # pydantic's documented use on a property
    @property
    def node(self) -> str:
        """`host:port` of the server, or `local socket`."""
        return "local socket" if self.host is None else f"{self.host}:{self.port}"

    def changed_history(self, previous: ReplicationState) -> bool:
        """Tell whether this reading is of another history than `previous` (a failover).

        Another system identifier (another cluster) or another timeline (a promotion).
        """
        return (
            self.system_identifier != previous.system_identifier
            or self.timeline != previous.timeline
        )

    def describe(self) -> str:
        """One line: `safe`/`unsafe`, the mode and why, the node and its history."""
        verdict = "unsafe" if self.unsafe else "safe"
        return (
            f"{verdict} ({self.mode.value}: {self._reason()}); node {self.node},"
            f" system {self.system_identifier}, timeline {self.timeline}"
        )

    def _reason(self) -> str:
        if self.mode is ReplicationMode.STANDBY:
            return "the node is in recovery, nothing is claimed there"
        if self.mode is ReplicationMode.NONE:
            return "no standby streams from this primary"
        streams = f"{self.standbys} standby{'s' if self.standbys != 1 else ''} stream"
        if self.mode is ReplicationMode.SYNCHRONOUS:
            return f"{streams}, commits wait for a synchronous standby"
        return (
            f"{streams} but commits do not wait for a synchronous one"
            f" (synchronous_standby_names={self.synchronous_standby_names!r},"
            f" synchronous_commit={self.synchronous_commit}); an acknowledged admission can"
            " be lost at failover"
        )
