"""Worker configuration (DESIGN §10): one frozen pydantic-settings model read from `QL3_WORKER_*`.

CLI flags (and a consuming service's keyword arguments) outrank the environment. The DSN is
`QL3_WORKER_DSN`, or `QL3_DSN` when that is not set, so one variable can serve a deployment's
Coordinator and workers (each with its own role's login). As for the Coordinator, there is no
clock setting (rule zero): leases, timeouts' recorded ends and retry times are database times;
the worker only measures how long to wait, with `time.monotonic()`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import SettingsConfigDict
from ql3_cluster_postgres import WorkerIngress
from ql3_runtime_core import ATTEMPT_KILL_MARGIN_MS, LEASE_MS_DEFAULT, LEASE_MS_MAX

from ._config import (
    RULE_ZERO,
    ConfigurationError,
    LogFormat,
    OwnerId,
    ProcessSettingsChecks,
    check_environment,
    default_owner_id,
    describe_settings_error,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ql3_runtime_core import WorkerRepository

__all__ = [
    "TASK_ENVIRONMENT",
    "WORKER_ENV_PREFIX",
    "WORKER_LEASE_MS_MIN",
    "WorkerSettings",
    "load_worker_settings",
    "postgres_ingress_factory",
]

WORKER_ENV_PREFIX = "QL3_WORKER_"
# A runner starts killing an unconfirmed command ATTEMPT_KILL_MARGIN_MS before its lease can end;
# a shorter lease would leave less than 2 s for the heartbeats before that point.
WORKER_LEASE_MS_MIN = ATTEMPT_KILL_MARGIN_MS + 2_000
# What a command finds in its environment (and a `ql3` it runs must not refuse as unknown).
TASK_ENVIRONMENT = (
    "QL3_RUN_ID",
    "QL3_ATTEMPT",
    "QL3_SCHEDULED_FOR_MS",
    "QL3_SCHEDULE",
    "QL3_TASK_PAYLOAD",
)


class WorkerSettings(ProcessSettingsChecks):
    """Everything a worker needs; each field is also `QL3_WORKER_<NAME>` in the environment.

    `lease_ms` is how long an attempt stays held without a heartbeat, by the database clock
    (at least `WORKER_LEASE_MS_MIN`; heartbeats go every third of the lease minus the kill
    margin); `grace_ms` how long a stopping worker lets running attempts finish before it kills
    and releases them; `run_commands` whether it runs command tasks (a service that runs only
    its Python tasks turns it off); `statement_timeout_ms` how long one database call may take
    (the server's statement timeout; the worker cuts the connection 1 s later).
    """

    model_config = SettingsConfigDict(
        env_prefix=WORKER_ENV_PREFIX,
        extra="forbid",
        frozen=True,
        case_sensitive=False,
    )

    dsn: SecretStr | None = None
    id: OwnerId = Field(default_factory=default_owner_id)
    concurrency: int = Field(default=4, ge=1, le=256)
    lease_ms: int = Field(default=LEASE_MS_DEFAULT, ge=WORKER_LEASE_MS_MIN, le=LEASE_MS_MAX)
    poll_interval_ms: int = Field(default=1_000, ge=10, le=60_000)
    grace_ms: int = Field(default=30_000, ge=0, le=3_600_000)
    run_commands: bool = True
    retry_initial_ms: int = Field(default=200, ge=1, le=60_000)
    retry_max_ms: int = Field(default=10_000, ge=1, le=600_000)
    metrics_port: int | None = Field(default=None, ge=0, le=65_535)
    # Scraped from other hosts (Prometheus in the cluster), so all interfaces by default.
    metrics_host: str = "0.0.0.0"  # noqa: S104
    log_format: LogFormat = LogFormat.TEXT
    log_level: str = "INFO"
    application_name: str = Field(default="ql3-worker", min_length=1, max_length=63)
    connect_timeout_s: float = Field(default=5.0, gt=0, le=300)
    statement_timeout_ms: int = Field(default=5_000, ge=100, le=60_000)

    def dsn_value(self) -> str | None:
        """Return the DSN in clear, for the ingress; never log it."""
        return None if self.dsn is None else self.dsn.get_secret_value()


def worker_variables() -> frozenset[str]:
    """Return the `QL3_*` names a worker reads or gives its commands (`check_environment`)."""
    names = {WORKER_ENV_PREFIX + name.upper() for name in WorkerSettings.model_fields}
    return frozenset(names | set(TASK_ENVIRONMENT))


def load_worker_settings(
    environ: Mapping[str, str] | None = None,
    **flags: object,
) -> WorkerSettings:
    """Build worker settings from `flags` (None values ignored) over the environment.

    Raises:
        ConfigurationError: one line naming each bad setting and value.

    """
    env = os.environ if environ is None else environ
    check_environment(env)
    given: dict[str, Any] = {key: value for key, value in flags.items() if value is not None}
    if "clock" in given:
        raise ConfigurationError(f"--clock: refused; {RULE_ZERO}")
    # QL3_DSN is the fallback, not a setting of this model: given explicitly, it would outrank
    # QL3_WORKER_DSN, which must win when a deployment sets both.
    if "dsn" not in given and WORKER_ENV_PREFIX + "DSN" not in env and "QL3_DSN" in env:
        given["dsn"] = env["QL3_DSN"]
    try:
        return WorkerSettings(**given)
    except ValidationError as exc:
        raise ConfigurationError(describe_settings_error(exc)) from exc


def postgres_ingress_factory(settings: WorkerSettings) -> Callable[[], WorkerRepository]:
    """Return a factory of the PostgreSQL ingress for `settings` (a pooled connection per slot)."""
    dsn = settings.dsn_value()
    if dsn is None:
        msg = "dsn: no database given; pass --dsn or set QL3_WORKER_DSN or QL3_DSN"
        raise ConfigurationError(msg)

    def build() -> WorkerRepository:
        return WorkerIngress(
            dsn,
            application_name=settings.application_name,
            # The loop, one per running attempt, and one more while a transactional task holds
            # its own for its whole run.
            max_connections=settings.concurrency + 2,
            connect_timeout_s=settings.connect_timeout_s,
            statement_timeout_ms=settings.statement_timeout_ms,
        )

    return build
