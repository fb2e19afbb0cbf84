"""QL3 cluster control: the Coordinator, the worker, their configuration, CLI, logs and metrics.

The embedded demo lives here too. A consuming service runs its Python tasks with `Worker`
(DESIGN §10): register a callable per task name (`@worker.task("name")`), then `worker.run()`.
The public surface is exactly `__all__`; implementation modules are private.
"""

from __future__ import annotations

from importlib.metadata import version as _version

from ._config import (
    ConfigurationError,
    CoordinatorSettings,
    LogFormat,
    WorkerSettings,
    check_environment,
    default_owner_id,
    load_settings,
    load_worker_settings,
)
from ._logs import configure_logging
from ._metrics import CoordinatorMetrics, HealthState, MetricsServer, metrics_wsgi_app
from .cli import app as cli_app
from .cli import main
from .coordinator import (
    AdmissionCallback,
    Coordinator,
    CoordinatorService,
    CycleOverlapError,
    CycleResult,
    postgres_repository_factory,
)
from .demo import DemoOptions, DemoVerdict, run_demo
from .worker import TaskContext, TaskFunction, Worker, WorkerMetrics, postgres_ingress_factory

__version__ = _version("ql3-cluster-control")

__all__ = [
    "AdmissionCallback",
    "ConfigurationError",
    "Coordinator",
    "CoordinatorMetrics",
    "CoordinatorService",
    "CoordinatorSettings",
    "CycleOverlapError",
    "CycleResult",
    "DemoOptions",
    "DemoVerdict",
    "HealthState",
    "LogFormat",
    "MetricsServer",
    "TaskContext",
    "TaskFunction",
    "Worker",
    "WorkerMetrics",
    "WorkerSettings",
    "__version__",
    "check_environment",
    "cli_app",
    "configure_logging",
    "default_owner_id",
    "load_settings",
    "load_worker_settings",
    "main",
    "metrics_wsgi_app",
    "postgres_ingress_factory",
    "postgres_repository_factory",
    "run_demo",
]
