"""How a suite's jobs are executed: one function decides, one per-job task does the work.

``execute_jobs`` runs jobs in this process, as many at once as the cores allow (the budget's cores
per job against this host's cores, and its GPUs against the visible devices). ``run_one_job`` is
the unit every mode calls: it runs the job under the watchdog (tasks.jobs), then records it in
MLflow. Recording is a separate task behind the execution's circuit breaker: if the tracking store
is unreachable, the result waits in the job folder and is logged when the store answers again, or by
``automl-eval sync`` (or the next run).
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from tasks import paths
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import Budget

logger = logging.getLogger("automl_eval.dispatch")


class ProgressListener(Protocol):
    """Told about jobs as they start and finish (the CLI draws its progress bar from this)."""

    def jobs_planned(self, count: int) -> None: ...

    def job_started(self, job: Job) -> None: ...

    def job_finished(self, job: Job, result: JobResult) -> None: ...


_listener: ProgressListener | None = None


def set_progress_listener(listener: ProgressListener | None) -> None:
    """One listener per process; the flow runs in the CLI's process in embedded mode."""
    global _listener
    _listener = listener


def notify_planned(count: int) -> None:
    if _listener is not None:
        _listener.jobs_planned(count)


@dataclass(frozen=True)
class JobContext:
    """What a job needs besides the Job itself; plain values so it crosses process boundaries."""

    execution: dict[str, str]  # tasks.tracking.log.Execution fields
    problem_type: str
    metric: str
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)  # enabled post-job blocks


def job_dir_for(job: Job) -> Path:
    """One folder per job key: a re-run of the same job replaces what an earlier attempt left."""
    return paths.runs_dir() / job.suite / job.key


# ---------------------------------------------------------------- how many at once


def visible_gpu_count() -> int:
    """GPUs this host offers jobs (CUDA_VISIBLE_DEVICES narrows them); 0 without a GPU driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library: a CPU host
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    return count


def max_parallel_jobs(budget: Budget, *, cpu_count: int | None = None, gpu_count: int | None = None) -> int:
    """Jobs that fit side by side: each takes budget.cores cores (and budget.gpus GPUs)."""
    cores = cpu_count or os.cpu_count() or 1
    parallel = max(1, cores // budget.cores)
    if budget.gpus:
        gpus = visible_gpu_count() if gpu_count is None else gpu_count
        if gpus >= budget.gpus:  # without enough GPUs the jobs are skipped quickly, so no limit
            parallel = min(parallel, gpus // budget.gpus)
    return parallel


class GpuPool:
    """Hands each running GPU job its own devices, and takes them back when it ends."""

    def __init__(self, device_count: int) -> None:
        self._free = list(range(device_count))
        self._lock = threading.Lock()

    def take(self, count: int) -> list[int] | None:
        if count <= 0:
            return None
        with self._lock:
            if len(self._free) < count:
                return None  # not enough devices: the job runner reports it as skipped
            taken, self._free = self._free[:count], self._free[count:]
            return taken

    def give_back(self, devices: list[int] | None) -> None:
        if devices:
            with self._lock:
                self._free.extend(devices)


_gpu_pool: GpuPool | None = None


# ---------------------------------------------------------------- the per-job tasks


@task(name="record-job", cache_policy=NO_CACHE)
def record_job(job_dir: str) -> str | None:
    """Log a finished job folder to MLflow; the run id, or None when the result waits on disk.

    No task retries: the execution's circuit breaker (tasks.tracking.breaker) bounds the wait once,
    then probes the store in the background and logs what waits when it answers again.
    """
    from tasks.tracking.breaker import record

    return record(Path(job_dir))


def _run_under_watchdog(job: Job, job_dir: Path, gpu_devices: list[int] | None,
                        evaluations: dict[str, dict[str, Any]]) -> JobResult:
    """The job, scored; then the suite's post-job evaluations on its saved model."""
    from tasks.jobs import run_job
    from tasks.specs import load_dataset_spec

    spec = load_dataset_spec(job.dataset)
    result = run_job(job, spec, job_dir, gpu_devices=gpu_devices)
    if evaluations:
        from tasks.evaluations.stage import run_evaluations

        result = run_evaluations(job, spec, job_dir, result, evaluations)
    return result


@task(name="run-job", task_run_name="{job_label}", cache_policy=NO_CACHE)
def run_one_job(job_dict: dict[str, Any], context: dict[str, Any], job_label: str = "") -> dict[str, Any]:
    """Run one job in its own process under the watchdog, then record it. Never raises for a job's
    own failure: the suite always goes on, and the failure is in the record."""
    from tasks.tracking.log import Execution, mark_result_final, write_pending

    job = Job.from_dict(job_dict)
    job_context = JobContext(**context)
    job_dir = job_dir_for(job)
    if job_dir.exists():
        shutil.rmtree(job_dir)  # an earlier attempt's files must not mix with this one's
    write_pending(job_dir, Execution(**job_context.execution), job,
                  problem_type=job_context.problem_type, metric=job_context.metric)
    if _listener is not None:
        _listener.job_started(job)
    devices = _gpu_pool.take(job.budget.gpus) if _gpu_pool is not None else None
    try:
        result = _run_under_watchdog(job, job_dir, devices, job_context.evaluations)
    except Exception as exc:  # the runner itself broke: still a record, never a lost job
        result = JobResult(job_key=job.key, status="failed", error=f"{type(exc).__name__}: {exc}")
        result.save(job_dir)
    finally:
        if _gpu_pool is not None:
            _gpu_pool.give_back(devices)
    mark_result_final(job_dir)
    recorded = _record(job_dir)
    if recorded:
        _log_run_link(job, result.status, job_context.execution, recorded)
    if _listener is not None:
        _listener.job_finished(job, result)
    return {"job_key": job.key, "status": result.status, "run_id": recorded, "job_dir": str(job_dir)}


def _log_run_link(job: Job, status: str, execution: dict[str, str], run_id: str) -> None:
    """One line in the job's Prefect log: where its MLflow run is."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

    from tasks.tracking import store

    try:
        run_logger: Any = get_run_logger()
    except MissingContextError:  # called outside a task or flow run (tests, sync)
        run_logger = logger
    experiment_id = execution.get("experiment_id", "")
    if execution.get("offline") or not experiment_id:  # its parent run was made after the job started
        try:
            experiment_id = store.client().get_run(run_id).info.experiment_id
        except Exception:  # the link is a convenience; the record is what matters
            return
    run_logger.info("%s %s: MLflow run %s", job.label, status, store.run_url(experiment_id, run_id))


def _record(job_dir: Path) -> str | None:
    try:
        return record_job(str(job_dir))
    except Exception as exc:
        logger.warning("could not record %s in MLflow (%s); it waits on disk: run `automl-eval sync`.",
                       job_dir.name, exc)
        return None


def record_skipped_job(job: Job, context: JobContext, reason: str) -> dict[str, Any]:
    """A job that will not run (its dataset failed the data gate): recorded with the reason."""
    from tasks.tracking.log import Execution, mark_result_final, write_pending

    job_dir = job_dir_for(job)
    if job_dir.exists():
        shutil.rmtree(job_dir)
    write_pending(job_dir, Execution(**context.execution), job, problem_type=context.problem_type,
                  metric=context.metric)
    result = JobResult(job_key=job.key, status="skipped", error=reason)
    result.save(job_dir)
    mark_result_final(job_dir)
    recorded = _record(job_dir)
    if _listener is not None:
        _listener.job_finished(job, result)
    return {"job_key": job.key, "status": "skipped", "run_id": recorded, "job_dir": str(job_dir)}


# ---------------------------------------------------------------- the one function that decides


def execute_jobs(
    jobs: list[Job],
    contexts: dict[str, JobContext],  # job key -> its context
    *,
    parallel: int | None = None,
    submit: Callable[[list[Job], dict[str, JobContext]], list[dict[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
    """Run every job and return one outcome dict per job (job_key, status, run_id, job_dir).

    Embedded mode runs them here, `parallel` at once (default: as many as the cores allow).
    Another mode passes `submit`, which must call `run_one_job` for each job wherever it runs them.
    """
    if not jobs:
        return []
    if submit is None:
        from flows.team_dispatch import submit_to_pools, team_mode

        if team_mode():  # AUTOML_EVAL_MODE=team: each job a flow run of the `job` deployment
            submit = submit_to_pools
    if submit is not None:
        return submit(jobs, contexts)
    global _gpu_pool
    budget = jobs[0].budget
    workers = min(len(jobs), parallel or max_parallel_jobs(budget))
    _gpu_pool = GpuPool(visible_gpu_count()) if budget.gpus else None
    outcomes: list[dict[str, Any]] = []
    with ThreadPoolTaskRunner(max_workers=workers) as runner:
        futures = [
            runner.submit(run_one_job, parameters={
                "job_dict": job.to_dict(),
                "context": contexts[job.key].__dict__,
                "job_label": job.label,
            })
            for job in jobs
        ]
        for job, future in zip(jobs, futures, strict=True):
            try:
                outcomes.append(future.result())
            except Exception as exc:  # a broken task must not stop the suite
                logger.warning("job %s did not complete: %s", job.label, exc)
                outcomes.append({"job_key": job.key, "status": "failed", "run_id": None,
                                 "job_dir": str(job_dir_for(job))})
    return outcomes
