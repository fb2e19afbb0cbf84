"""Settings of both processes (DESIGN §13, §10, §1): frozen pydantic-settings models.

The Coordinator reads `QL3_*`, the worker `QL3_WORKER_*` (its DSN falls back to `QL3_DSN`, so one
variable can serve a deployment's Coordinator and workers, each with its own role's login). CLI
flags (and a consuming service's keyword arguments) arrive as init keyword arguments and outrank
the environment. Everything is validated before any connection is attempted.

There is deliberately no `clock` setting: the database clock is the only scheduling authority
(rule zero), so `QL3_CLOCK` or a `clock` field is refused with a message saying so, and any other
unknown `QL3_*` variable is refused by name (pydantic-settings itself silently ignores unknown
environment variables). Both models live in this one module because each process refuses the
variables neither declares: the check needs the fields of both, so splitting them would make
the two modules import each other.
"""

from __future__ import annotations

import copy
import os
import secrets
import socket
from collections.abc import Mapping
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Final, Self

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict
from ql3_cluster_postgres import ConnectionSettings, InvalidConninfoError, check_conninfo
from ql3_runtime_core import (
    ATTEMPT_KILL_MARGIN_MS,
    LEASE_MS_DEFAULT,
    LEASE_MS_MAX,
    LEASE_MS_MIN,
    OWNER_ID_MAX_LENGTH,
    QL3Error,
)

__all__ = [
    "ENV_PREFIX",
    "RULE_ZERO",
    "TASK_ENVIRONMENT",
    "WORKER_ENV_PREFIX",
    "WORKER_LEASE_MS_MIN",
    "ConfigurationError",
    "CoordinatorSettings",
    "LogFormat",
    "OwnerId",
    "ProcessSettingsChecks",
    "WorkerSettings",
    "check_environment",
    "default_owner_id",
    "describe_settings_error",
    "load_settings",
    "load_worker_settings",
]

ENV_PREFIX = "QL3_"
RULE_ZERO = (
    "rule zero: the database clock (PostgreSQL clock_timestamp()) is the only scheduling"
    " authority; QL3 has no clock setting and never reads a node clock"
)


class ConfigurationError(QL3Error, ValueError):
    """Raised when a setting, flag or `QL3_*` variable is unknown or invalid; names it."""

    __module__ = "ql3_cluster_control"


class LogFormat(StrEnum):
    """How log records are rendered: `text` (key=value) or `json` (one object per line)."""

    TEXT = "text"
    JSON = "json"


def default_owner_id() -> str:
    """Host name, process id and a random suffix: unique across restarts and replicas."""
    host = socket.gethostname() or "ql3"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"[:OWNER_ID_MAX_LENGTH]


OwnerId = Annotated[
    str, Field(min_length=1, max_length=OWNER_ID_MAX_LENGTH, pattern=r"^\S(.*\S)?$")
]


def _connection_field(name: str) -> Any:  # noqa: ANN401 - a pydantic FieldInfo used as a default
    """Return cluster-postgres' `ConnectionSettings` field `name`: its one default and bounds."""
    return copy.deepcopy(ConnectionSettings.model_fields[name])


class ProcessSettingsChecks(BaseSettings):
    """The checks a Coordinator's and a worker's settings share, written once.

    Both refuse a clock setting (rule zero) and unknown `QL3_*` variables, mask a bad DSN, accept
    the same log levels and need `retry_max_ms >= retry_initial_ms`. The fields themselves are
    declared by each subclass (their defaults and bounds differ), hence `check_fields=False`.
    """

    if TYPE_CHECKING:  # declared by each subclass; here for the type checker only
        retry_initial_ms: int
        retry_max_ms: int

    @model_validator(mode="before")
    @classmethod
    def _refuse_clock(cls, data: object) -> object:
        if isinstance(data, Mapping) and any(str(key).lower() == "clock" for key in data):
            raise ConfigurationError(f"clock: refused; {RULE_ZERO}")
        # pydantic-settings ignores unknown QL3_* variables; constructing directly checks too.
        check_environment()
        return data

    @field_validator("dsn", check_fields=False)
    @classmethod
    def _check_dsn(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            try:
                check_conninfo(value.get_secret_value(), field="dsn")
            except InvalidConninfoError as exc:
                # The error names the field and masks the value (dsn=***): keep only the reason.
                raise ValueError(exc.reason) from exc
        return value

    @field_validator("log_level", check_fields=False)
    @classmethod
    def _check_level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            msg = f"log_level={value!r} is not one of DEBUG, INFO, WARNING, ERROR"
            raise ValueError(msg)
        return level

    @model_validator(mode="after")
    def _check_backoff(self) -> Self:
        initial, most = self.retry_initial_ms, self.retry_max_ms
        if most < initial:
            msg = f"retry_max_ms={most} is smaller than retry_initial_ms={initial}"
            raise ValueError(msg)
        return self


# Schedules per claim round and occurrences per cycle (DESIGN §13). The claim batch was 16 until
# benchmarked: on a durable cluster every round pays fixed costs (4 round trips, 2 statements, the
# fenced commit's WAL flush, per-statement server overhead) that 16 admissions could not amortize.
# Measured on the durable bench cluster (2 cores, quiet, per-second crons, R = 2, 15 s windows):
# S = 1 000 lateness p99 370-501 ms at 16, 195-261 ms at 64, 101-105 ms at 128; S = 100 p99
# 27 ms at 16, 15-16 ms at 64, 12-18 ms at 128 (bench/analysis.md). Larger batches hold more
# schedules per replica at once (a dead replica's claims wait for their lease either way), and
# the cycle budget still bounds what one commit admits.
CLAIM_BATCH_DEFAULT: Final = 128
CYCLE_BUDGET_DEFAULT: Final = 256


class CoordinatorSettings(ProcessSettingsChecks):
    """Everything a Coordinator replica needs; each field is also `QL3_<NAME>` in the environment.

    The connection fields (timeout, keepalives, `tcp_user_timeout`) are cluster-postgres'
    `ConnectionSettings` fields, defaults and bounds included, under `QL3_*` names; they are
    seconds-scale so a partitioned replica notices the loss (and the server drops its locks) in
    seconds rather than the kernel's 15 minutes. `connection_settings()` hands them over.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="forbid",
        frozen=True,
        case_sensitive=False,
    )

    dsn: SecretStr | None = None
    owner_id: OwnerId = Field(default_factory=default_owner_id)
    lease_ms: int = Field(default=LEASE_MS_DEFAULT, ge=LEASE_MS_MIN, le=LEASE_MS_MAX)
    claim_batch: int = Field(default=CLAIM_BATCH_DEFAULT, ge=1, le=1_000)
    cycle_budget: int = Field(default=CYCLE_BUDGET_DEFAULT, ge=1, le=100_000)
    poll_interval_ms: int = Field(default=5_000, ge=10, le=3_600_000)
    retry_initial_ms: int = Field(default=200, ge=1, le=60_000)
    retry_max_ms: int = Field(default=10_000, ge=1, le=600_000)
    # While a server answers but none accepts writes (a leader change), retry this often, for
    # at most the window from the first fault; then, as when no host answers, back off.
    retry_fast_ms: int = Field(default=100, ge=10, le=10_000)
    retry_fast_window_ms: int = Field(default=60_000, ge=0, le=3_600_000)
    max_serialization_retries: int = Field(default=8, ge=0, le=1_000)
    metrics_port: int | None = Field(default=None, ge=0, le=65_535)
    # Scraped from other hosts (Prometheus in the cluster), so all interfaces by default.
    metrics_host: str = "0.0.0.0"  # noqa: S104
    log_format: LogFormat = LogFormat.TEXT
    log_level: str = "INFO"
    application_name: str = Field(default="ql3-coordinator", min_length=1, max_length=63)
    connect_timeout_s: float = _connection_field("connect_timeout_s")
    keepalives_idle_s: int = _connection_field("keepalives_idle_s")
    keepalives_interval_s: int = _connection_field("keepalives_interval_s")
    keepalives_count: int = _connection_field("keepalives_count")
    tcp_user_timeout_ms: int = _connection_field("tcp_user_timeout_ms")

    def connection_settings(self) -> ConnectionSettings:
        """Return how the repository opens its connections, from these settings."""
        return ConnectionSettings(
            application_name=self.application_name,
            connect_timeout_s=self.connect_timeout_s,
            keepalives_idle_s=self.keepalives_idle_s,
            keepalives_interval_s=self.keepalives_interval_s,
            keepalives_count=self.keepalives_count,
            tcp_user_timeout_ms=self.tcp_user_timeout_ms,
        )

    def dsn_value(self) -> str | None:
        """Return the DSN in clear, for the repository; never log it."""
        return None if self.dsn is None else self.dsn.get_secret_value()


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
    its Python tasks turns it off); `listen` whether one extra connection waits for the
    `ql3_attempt_queued` notification so an idle worker takes new work at once rather than at its
    next poll (off behind a pooler in transaction mode, where LISTEN does not work);
    `statement_timeout_ms` how long one database call may take
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
    # One extra connection LISTENs for queued attempts, so an idle worker polls at once.
    listen: bool = True
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


def _known_variables() -> frozenset[str]:
    coordinator = {ENV_PREFIX + name.upper() for name in CoordinatorSettings.model_fields}
    worker = {WORKER_ENV_PREFIX + name.upper() for name in WorkerSettings.model_fields}
    return frozenset(coordinator | worker | set(TASK_ENVIRONMENT))


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Refuse `QL3_CLOCK` (rule zero) and any other `QL3_*` variable that is not a setting.

    Raises:
        ConfigurationError: naming the first offending variable.

    """
    env = os.environ if environ is None else environ
    known = _known_variables()
    # Sorted, so the variable named is the same on every run when several are wrong.
    for name in sorted(env):
        upper = name.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        if upper == ENV_PREFIX + "CLOCK":
            raise ConfigurationError(f"{name}: refused; {RULE_ZERO}")
        raise ConfigurationError(
            f"{name}: unknown QL3 setting (known: {', '.join(sorted(known))})",
        )


def describe_settings_error(exc: ValidationError) -> str:
    """One line naming each bad setting and its value (a DSN is never shown)."""
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "settings"
        detail = error["msg"].removeprefix("Value error, ")
        if field == "settings" or detail.startswith(f"{field}:"):
            parts.append(detail)
        elif error["type"] == "extra_forbidden":
            parts.append(f"{field}: unknown setting")
        else:
            value = error.get("input")
            # A DSN may hold a password: name the field, never echo its value.
            shown = "***" if field == "dsn" else repr(value)
            parts.append(f"{field}={shown}: {detail}")
    return "; ".join(parts)


def load_settings(
    environ: Mapping[str, str] | None = None,
    **flags: object,
) -> CoordinatorSettings:
    """Build settings from `flags` (None values ignored) over the `QL3_*` environment.

    Raises:
        ConfigurationError: one line naming each bad setting and value.

    """
    check_environment(environ)
    given: dict[str, Any] = {key: value for key, value in flags.items() if value is not None}
    if "clock" in given:
        # The hidden --clock flag exists only to be refused with this message (rule zero).
        raise ConfigurationError(f"--clock: refused; {RULE_ZERO}")
    try:
        return CoordinatorSettings(**given)
    except ValidationError as exc:
        raise ConfigurationError(describe_settings_error(exc)) from exc


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
