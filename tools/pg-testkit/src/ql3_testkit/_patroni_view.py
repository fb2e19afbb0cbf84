"""What a test reads of a running Patroni cluster, and the conninfo its clients use.

Members' state comes from Patroni's REST API (`GET /cluster`) and the synchronous standby from
etcd (the `/sync` key), never from `patronictl` (each call costs about 1.4 s of CPU) nor from a
standby's control file (its timeline lags). Every wait polls against a monotonic deadline.
`_patroni.PatroniCluster` adds the processes and the faults on top of this class.
"""

from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.conninfo import make_conninfo

from ._durable_write import durable_write
from ._errors import ThrowawayClusterError
from ._patroni_setup import HOST, SCOPE, SUPERUSER, PatroniMember, http_json

if TYPE_CHECKING:
    from collections.abc import Callable

_POLL_S = 0.1


class PatroniView:
    """The read side of a Patroni cluster: state, waits on it, conninfo (no process of its own)."""

    members: list[PatroniMember]
    superuser_password: str
    _etcd_port: int

    def member(self, name: str) -> PatroniMember:
        """Return the member called `name` (m1, m2, m3)."""
        for member in self.members:
            if member.name == name:
                return member
        raise ThrowawayClusterError(f"Patroni cluster: no member {name!r}")

    # -- state from the REST API ---------------------------------------------------------------

    def state(self) -> dict[str, dict[str, Any]]:
        """Members as Patroni's `GET /cluster` reports them, by name (asks each member in turn)."""
        for member in self.members:
            if not member.patroni_alive:
                continue
            body = http_json(f"http://{HOST}:{member.api_port}/cluster")
            if isinstance(body, dict):
                return {str(m["name"]): m for m in body.get("members", [])}
        return {}

    def leader(self) -> str | None:
        """Name the member Patroni reports as the running leader (None during a change)."""
        for name, info in self.state().items():
            if info.get("role") == "leader" and info.get("state") == "running":
                return name
        return None

    def timeline(self) -> int:
        """Return the leader's timeline as Patroni reports it (a standby's control file lags)."""
        name = self.leader()
        if name is None:
            raise ThrowawayClusterError("Patroni cluster: no leader to read the timeline from")
        return int(self.state()[name].get("timeline", 0))

    def sync_state(self) -> dict[str, Any]:
        """Patroni's `/sync` key read from etcd: {"leader": ..., "sync_standby": ...} or {}.

        Patroni fails over only to a member this key names for the current leader; `GET
        /cluster` shows the role from the key without checking its leader, so a stale key
        there looks healthy. Read it through etcd's v3 JSON gateway.
        """
        key = base64.b64encode(f"/service/{SCOPE}/sync".encode()).decode()
        body = http_json(f"http://{HOST}:{self._etcd_port}/v3/kv/range", {"key": key})
        if not isinstance(body, dict) or not body.get("kvs"):
            return {}
        value = json.loads(base64.b64decode(body["kvs"][0]["value"]))
        return value if isinstance(value, dict) else {}

    def sync_standby(self) -> str | None:
        """Name the synchronous standby Patroni recorded for the current leader, if any."""
        sync = self.sync_state()
        leader = self.leader()
        if leader is None or sync.get("leader") != leader:
            return None
        standby = sync.get("sync_standby")
        return str(standby) if standby else None

    def healthy(self) -> bool:
        """Tell whether a leader accepts durable writes and every other member streams."""
        members = self.state()
        leader = self.leader()
        if leader is None or len(members) != len(self.members):
            return False
        streaming = all(
            info.get("state") == "streaming" for name, info in members.items() if name != leader
        )
        return streaming and self.sync_standby() is not None and durable_write(self.dsn())

    # -- waits and faults ----------------------------------------------------------------------

    def wait_healthy(self, *, timeout_s: float = 60.0) -> float:
        """Wait until `healthy()`; return the seconds waited."""
        return self._wait(self.healthy, timeout_s, "every member is healthy")

    def wait_new_leader(
        self, old: str, *, since: float | None = None, timeout_s: float = 60.0
    ) -> tuple[str, float]:
        """Wait until a member other than `old` leads and accepts durable writes.

        Returns the new leader's name and the seconds from `since` (a `time.monotonic()` taken
        just before the fault; default: this call) until its first durable write.
        """
        start = time.monotonic() if since is None else since
        found: list[str] = []

        def ready() -> bool:
            leader = self.leader()
            if leader is None or leader == old:
                return False
            if not durable_write(self.member_dsn(leader)):
                return False
            found.append(leader)
            return True

        self._wait(ready, timeout_s, f"a leader other than {old} accepts writes")
        return found[-1], time.monotonic() - start

    def wait_member_streaming(self, name: str, *, timeout_s: float = 90.0) -> float:
        """Wait until member `name` is back as a streaming replica on the leader's timeline."""

        def streaming() -> bool:
            members = self.state()
            leader = self.leader()
            info = members.get(name)
            if info is None or leader is None or leader == name:
                return False
            same_timeline = info.get("timeline") == members[leader].get("timeline")
            return info.get("state") == "streaming" and same_timeline

        return self._wait(streaming, timeout_s, f"member {name} streams from the leader")

    # -- connecting ----------------------------------------------------------------------------

    def dsn(self, dbname: str = "postgres", **params: str) -> str:
        """Multi-host superuser conninfo: every member, `target_session_attrs=read-write`."""
        hosts = ",".join(HOST for _ in self.members)
        ports = ",".join(str(member.pg_port) for member in self.members)
        options: dict[str, str] = {
            "target_session_attrs": "read-write",
            "user": SUPERUSER,
            "password": self.superuser_password,
            "connect_timeout": "2",
            **params,
        }
        return make_conninfo("", host=hosts, port=ports, dbname=dbname, **options)

    def member_dsn(self, name: str, dbname: str = "postgres", **params: str) -> str:
        """Superuser conninfo of one member."""
        member = self.member(name)
        options = {"user": SUPERUSER, "password": self.superuser_password, **params}
        return make_conninfo(
            "", host=HOST, port=str(member.pg_port), dbname=dbname, connect_timeout="2", **options
        )

    def connect(self, dbname: str = "postgres") -> psycopg.Connection[tuple[Any, ...]]:
        """Open an autocommit superuser connection to the leader (set-up work only)."""
        return psycopg.connect(self.dsn(dbname), autocommit=True)

    # -- helpers -------------------------------------------------------------------------------

    def _wait(self, condition: Callable[[], bool], timeout_s: float, what: str) -> float:
        started = time.monotonic()
        deadline = started + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                raise ThrowawayClusterError(
                    f"Patroni cluster: timed out after {timeout_s:.0f} s waiting until {what}"
                    f"; state {self.state()}"
                )
            time.sleep(_POLL_S)
        return time.monotonic() - started

    def __repr__(self) -> str:
        ports = [member.pg_port for member in self.members]
        return f"PatroniCluster(ports={ports}, etcd={self._etcd_port})"
