"""Disposable PostgreSQL clusters for tests, benchmarks and chaos runs (DESIGN §14).

A `ThrowawayCluster` is the product's `PrivateServer` (one server in a private temporary folder,
SCRAM over 127.0.0.1, run as an unprivileged OS user when this process is root) plus what only
tests need: non-durable settings, a database clock moved live through libfaketime (`_faketime`),
crashes and restarts on the same port, fencing, and streaming standbys with promotion
(`_standby`). Starting and stopping the server is the product's code, written once.

Fencing: `fence()` stops the server immediately and renames `postgresql.conf` to
`postgresql.conf.fenced`; PostgreSQL then refuses to start from that data dir ("could not access the
server configuration file"), which is exactly what a fenced old primary must do.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ql3_cluster_postgres import PrivateServer

from . import _standby
from ._binaries import testkit_bin_dir
from ._crash import children_of, crash, wait_gone
from ._errors import ThrowawayClusterError
from ._faketime import (
    FAKETIME_SETTINGS,
    faketime_env,
    find_faketime_library,
    write_clock_file,
    write_frozen_clock_file,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

__all__ = ["ThrowawayCluster"]

_RESTART_TIMEOUT_S = 60.0
# Standbys and failover tests need these; the rest are PostgreSQL's defaults, pinned.
_REPLICATION_SETTINGS: Mapping[str, str] = {
    "wal_level": "replica",
    "max_wal_senders": "10",
    "max_replication_slots": "10",
    "hot_standby": "on",
    "wal_keep_size": "128MB",
}
# Fast tests; a crash may lose data, which tests that kill servers must keep in mind.
_NON_DURABLE_SETTINGS: Mapping[str, str] = {
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class ThrowawayCluster(PrivateServer):
    """A private PostgreSQL server for tests; always stopped and removed after use.

    Use as a context manager or call `start()` / `stop()`. `faketime=True` runs the server under
    libfaketime so `set_clock_offset_ms` / `freeze_clock_at_ms` move its clock live. `durable=False`
    turns fsync, full_page_writes and synchronous_commit off. `keep=True` leaves the folder for
    post-mortems. `os_user` runs the server when this process is root; a `base_dir` must then be
    traversable by that user (the default, the system temp dir, is). Without `bin_dir`, the
    server is the one `QL3TEST_PG_VERSION` or `QL3TEST_PG_BIN` names (see `_binaries`), else
    the product's lookup (`find_postgres_bin_dir`).
    """

    __module__ = "ql3_testkit"

    def __init__(
        self,
        *,
        faketime: bool = False,
        settings: Mapping[str, str] | None = None,
        bin_dir: Path | None = None,
        base_dir: Path | None = None,
        durable: bool = False,
        name: str = "ql3",
        os_user: str = "postgres",
        keep: bool = False,
    ) -> None:
        super().__init__(
            name=name,
            # The session's server version (QL3TEST_PG_VERSION / QL3TEST_PG_BIN), else the
            # product's own lookup.
            bin_dir=bin_dir or testkit_bin_dir(),
            base_dir=base_dir,
            os_user=os_user,
            settings=settings,
            keep=keep,
        )
        self.faketime = faketime
        self.durable = durable
        self._clock_offset_ms = 0
        self._standbys: list[ThrowawayCluster] = []
        self._primary: ThrowawayCluster | None = None  # set on a standby: cloned, not initdb'd
        self._fenced = False

    @property
    def fenced(self) -> bool:
        """True once `fence()` ran."""
        return self._fenced

    # -- life cycle ----------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the server immediately (and standbys made from it) and remove the folder.

        Idempotent; also safe after a failed start, `kill()` or `fence()`. A no-op in a forked
        child: only the process that started the cluster tears it down.
        """
        for standby in self._standbys:
            standby.stop()
        self._standbys.clear()
        super().stop()

    def kill(self) -> None:
        """Crash the server: SIGKILL the postmaster, then wait for its orphaned backends."""
        process, self._process = self._process, None
        if process is not None:
            crash(process)

    def restart(self) -> None:
        """Start the server again on the same port (after `kill()`, or to restart it)."""
        self._halt()
        deadline = time.monotonic() + _RESTART_TIMEOUT_S
        while not self._launch(self.port):
            if time.monotonic() > deadline:
                raise self._start_error(f"port {self.port} stayed busy")
            time.sleep(0.2)

    def fence(self) -> None:
        """Stop the server immediately and make every later start from this data dir fail."""
        self._halt()
        conf = self.data_dir / "postgresql.conf"
        if conf.exists():
            conf.rename(conf.with_name("postgresql.conf.fenced"))
        self._fenced = True

    # -- clock ---------------------------------------------------------------------------------

    def set_clock_offset_ms(self, offset_ms: int) -> None:
        """Set the database clock to real time + `offset_ms`, live: open sessions see it at once."""
        self._require_faketime("set_clock_offset_ms")
        self._clock_offset_ms = offset_ms
        write_clock_file(self.base_dir, offset_ms)

    def freeze_clock_at_ms(self, at_ms: int) -> None:
        """Stop the database clock at `at_ms` (epoch ms), live; `set_clock_offset_ms` restarts it.

        Every `clock_timestamp()` then returns exactly `at_ms`, so a test can put a claim's
        commit or takeover precisely on its expiry instant.
        """
        self._require_faketime("freeze_clock_at_ms")
        write_frozen_clock_file(self.base_dir, at_ms)

    @property
    def clock_offset_ms(self) -> int:
        """The offset last set with `set_clock_offset_ms` (0 at start)."""
        return self._clock_offset_ms

    def _require_faketime(self, method: str) -> None:
        if not self.faketime:
            raise ThrowawayClusterError(
                f"cluster {self.name!r}: {method} needs ThrowawayCluster(faketime=True)"
            )

    # -- replication ---------------------------------------------------------------------------

    def create_standby(self, *, synchronous: bool = False) -> ThrowawayCluster:
        """Clone this server with `pg_basebackup -R`, start it and wait until it streams.

        The standby has its own folder, port and (with faketime) its own clock file starting at
        this cluster's offset. `synchronous=True` makes it the synchronous standby and turns
        synchronous_commit on here, so commits wait for it. `stop()` here also stops it.
        """
        standby = ThrowawayCluster(
            faketime=self.faketime,
            settings=self.settings,
            bin_dir=self.bin_dir,
            base_dir=self.base_parent,
            durable=self.durable,
            name=f"{self.name}_standby{len(self._standbys) + 1}",
            os_user=self.os_user,
            keep=self.keep,
        )
        standby.superuser_password = self.superuser_password
        standby._clock_offset_ms = self._clock_offset_ms
        standby._primary = self
        self._standbys.append(standby)
        standby.start()
        if synchronous:
            _standby.make_synchronous(self, standby.name)
        _standby.wait_streaming(self, standby.name, synchronous=synchronous)
        return standby

    def promote(self) -> None:
        """Promote this standby (pg_ctl promote) and wait until it accepts writes."""
        _standby.promote(self)

    def in_recovery(self) -> bool:
        """Tell whether the server is a standby (in recovery)."""
        return _standby.in_recovery(self)

    def timeline(self) -> int:
        """Read the server's current timeline (1 after initdb, 2 after the first promotion)."""
        return _standby.timeline(self)

    def standbys(self) -> list[ThrowawayCluster]:
        """Return the standbys created from this cluster (stopped with it)."""
        return list(self._standbys)

    # -- PrivateServer hooks -------------------------------------------------------------------

    def _initdb_options(self) -> list[str]:
        options = ["--data-checksums"]  # pg_rewind and checksum verification need them
        if not self.durable:
            options.append("--no-sync")
        return options

    def _default_settings(self) -> dict[str, str]:
        settings = {**super()._default_settings(), **_REPLICATION_SETTINGS}
        if not self.durable:
            settings.update(_NON_DURABLE_SETTINGS)
        if self.faketime:
            settings.update(FAKETIME_SETTINGS)
        return settings

    def _server_env(self) -> dict[str, str]:
        env = super()._server_env()
        if self.faketime:
            env.update(faketime_env(self.base_dir))
        return env

    def _prepare_folder(self) -> None:
        if self.faketime:
            find_faketime_library()  # fail early, with the install hint, before initdb
            write_clock_file(self.base_dir, self._clock_offset_ms)

    def _populate(self) -> None:
        if self._primary is None:
            super()._populate()
        else:  # a standby: its data dir is the primary's, streamed
            _standby.base_backup(self._primary, self, no_sync=not self.durable)

    def _halt(self) -> None:
        # Immediate shutdown; the backends seen before it must be gone before a restart.
        children = children_of(self.pid) if self.running else []
        super()._halt()
        wait_gone(children)

    def __repr__(self) -> str:
        where = f"{self.host}:{self._port}" if self._port else "not started"
        return f"ThrowawayCluster(name={self.name!r}, {where}, faketime={self.faketime})"
