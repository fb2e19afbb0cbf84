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
from .cli._app import app as cli_app
from .cli._app import main
from .coordinator._coordinator import Coordinator
from .coordinator._cycle import AdmissionCallback, CycleOverlapError, CycleResult
from .coordinator._service import CoordinatorService, postgres_repository_factory
from .demo._demo import DemoOptions, run_demo
from .demo._verdict import DemoVerdict
from .worker._ingress import postgres_ingress_factory
from .worker._metrics import WorkerMetrics
from .worker._python_runner import TaskContext, TaskFunction
from .worker._worker import Worker

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
