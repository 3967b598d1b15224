"""MLflow's system metrics (CPU, memory, disk, network, GPU) on an execution's parent run."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

from tasks.tracking import store
from tasks.tracking.breaker import is_open
from tasks.tracking.execution import Execution

logger = logging.getLogger("automl_eval.tracking")


@contextmanager
def system_metrics(execution: Execution, sampling_interval_s: float = 15.0) -> Iterator[None]:
    """MLflow system metrics (CPU, memory, disk, network, GPU) on the parent run while jobs run.

    One sampler for the whole execution, every 15 s, keeps it cheap; jobs' own figures come
    from the watchdog's process-tree sampling instead.
    """
    if execution.offline:  # no parent run to sample into
        yield
        return
    try:
        monitor = SystemMetricsMonitor(execution.execution_id, sampling_interval=sampling_interval_s,
                                       resume_logging=True, tracking_uri=store.tracking_uri())
        monitor.start()
    except Exception as exc:  # a missing sensor never stops a suite
        logger.warning("MLflow system metrics are off for this execution: %s", exc)
        yield
        return
    try:
        yield
    finally:
        # With the store away its last samples cannot be sent: that is said once, by the breaker.
        monitor_log = logging.getLogger("mlflow.system_metrics")
        level = monitor_log.level
        if is_open(execution.execution_id):
            monitor_log.setLevel(logging.CRITICAL)
        try:
            if is_open(execution.execution_id):
                # Its last samples cannot be sent; joining its thread would only wait out requests.
                monitor._shutdown_event.set()
            else:
                monitor.finish()
        finally:
            monitor_log.setLevel(level)
