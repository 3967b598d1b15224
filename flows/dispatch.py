"""How a suite's jobs are executed: a dispatcher object runs them, one per-job unit does the work.

The suite flow is handed a ``Dispatcher``: ``EmbeddedDispatcher`` (here) runs jobs in this process,
as many at once as the cores allow (the budget's cores per job against this host's cores, and its
GPUs against the visible devices); ``TeamDispatcher`` (team_dispatch.py, which imports this
module) hands them to long-lived workers. Progress and GPU leases are the dispatcher's own state.
Both end in ``run_and_record``, the unit that runs one job under the watchdog (tasks.jobs), then
records it in MLflow. Recording is a separate task behind the execution's circuit breaker: if the
tracking store is unreachable, the result waits in the job folder and is logged when the store
answers again, or by ``automl-eval sync`` (or the next run).
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol, Self

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.task_runners import ThreadPoolTaskRunner

from tasks.evaluations.stage import run_evaluations
from tasks.gpus import GpuPool, visible_gpu_count, visible_gpu_ids
from tasks.jobs import run_job
from tasks.launch import FORK_SERVER, chosen_launcher
from tasks.paths import job_dir_for
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import Budget, load_dataset_spec
from tasks.tracking import store
from tasks.tracking.breaker import record
from tasks.tracking.execution import Execution
from tasks.tracking.job_folder import mark_result_final, write_pending

logger = logging.getLogger("automl_eval.dispatch")


class ProgressListener(Protocol):
    """Told about jobs as they start and finish (the CLI draws its progress bar from this)."""

    def jobs_planned(self, count: int) -> None: ...

    def job_started(self, job: Job) -> None: ...

    def job_finished(self, job: Job, result: JobResult) -> None: ...


@dataclass(frozen=True)
class JobContext:
    """What a job needs besides the Job itself; plain values so it crosses process boundaries."""

    execution: dict[str, str]  # tasks.tracking.execution.Execution fields
    problem_type: str
    metric: str
    evaluations: dict[str, dict[str, Any]] = field(default_factory=dict)  # enabled post-job blocks
    # Team mode: the suite's code (tasks.code_version) and commit, which a worker's must match.
    code: str = ""
    commit: str = ""


@dataclass(frozen=True)
class JobOutcome:
    """What the suite learns of one job from its dispatcher. In team mode it crosses Prefect's
    result storage as a plain dict (to_dict / from_dict), with the job's JobResult beside it."""

    job_key: str
    status: str  # the JobResult's status; "unknown" when a team worker's answer cannot be read here
    run_id: str | None  # its MLflow run; None while its result waits on disk
    job_dir: str
    error: str = ""  # why, when the dispatcher itself decided the job failed (a lost worker)
    submitted_unix: float | None = None  # team mode: when the job was handed to the team
    worker: str = ""  # team mode: the worker that ran it, its host and process
    host: str = ""
    pid: int | None = None
    started_unix: float | None = None  # team mode: when that worker started and finished it
    finished_unix: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """From a worker's answer; keys this version does not know are left out."""
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


class Dispatcher(Protocol):
    """Runs a suite's jobs somewhere and returns one JobOutcome per job, in the order given. The
    suite flow is handed one."""

    def warm_up(self) -> None:
        """Called before the data gates, so start-up work overlaps them."""

    def planned(self, count: int) -> None:
        """How many jobs this run will account for (the progress bar's total); a run in rounds
        calls it again each round with the total so far."""

    def skip(self, job: Job, context: JobContext, reason: str) -> JobOutcome:
        """Record a job that will not run (e.g. its dataset failed the data gate), with the reason."""

    def run(self, jobs: list[Job], contexts: dict[str, JobContext]) -> list[JobOutcome]:
        """Run every job; never raises for a job's own failure."""


# ---------------------------------------------------------------- the per-job unit


@task(name="record-job", cache_policy=NO_CACHE)
def record_job(job_dir: str) -> str | None:
    """Log a finished job folder to MLflow; the run id, or None when the result waits on disk.

    No task retries: the execution's circuit breaker (tasks.tracking.breaker) bounds the wait once,
    then probes the store in the background and logs what waits when it answers again.
    """

    return record(Path(job_dir))


def _record(job_dir: Path) -> str | None:
    try:
        return record_job(str(job_dir))
    except Exception as exc:
        logger.warning("could not record %s in MLflow (%s); it waits on disk: run `automl-eval sync`.",
                       job_dir.name, exc)
        return None


def _run_under_watchdog(job: Job, job_dir: Path, gpu_devices: list[int] | None,
                        evaluations: dict[str, dict[str, Any]]) -> JobResult:
    """The job, scored; then the suite's post-job evaluations on its saved model."""

    spec = load_dataset_spec(job.dataset)
    result = run_job(job, spec, job_dir, gpu_devices=gpu_devices)
    if evaluations:
        result = run_evaluations(job, spec, job_dir, result, evaluations)
    return result


def run_and_record(job: Job, context: JobContext, gpu_devices: list[int] | None, *,
                   still_ours: Callable[[], bool] | None = None) -> tuple[JobResult, JobOutcome]:
    """Run one job in its own process under the watchdog, then record it; every mode calls this.

    `gpu_devices` are the devices the caller leased for it (None: it asks for none; []: none could
    be leased, so the job is skipped with the reason). `still_ours`, asked just before recording,
    says whether the job is still this caller's: a job the suite already gave up on (its worker
    looked dead) is left on disk, not recorded a second time. Never raises for the job's own failure."""

    job_dir = job_dir_for(job)
    if job_dir.exists():
        shutil.rmtree(job_dir)  # an earlier attempt's files must not mix with this one's
    write_pending(job_dir, Execution(**context.execution), job,
                  problem_type=context.problem_type, metric=context.metric)
    try:
        result = _run_under_watchdog(job, job_dir, gpu_devices, context.evaluations)
    except Exception as exc:  # the runner itself broke: still a record, never a lost job
        result = JobResult(job_key=job.key, status="failed", error=f"{type(exc).__name__}: {exc}")
        result.save(job_dir)
    mark_result_final(job_dir)
    outcome = JobOutcome(job_key=job.key, status=result.status, run_id=None, job_dir=str(job_dir))
    if still_ours is not None and not still_ours():
        logger.warning("%s finished after the suite gave it up; its result stays in %s.", job.label, job_dir)
        return result, outcome
    run_id = _record(job_dir)
    if run_id:
        _log_run_link(job, result.status, context.execution, run_id)
    return result, replace(outcome, run_id=run_id)


def _log_run_link(job: Job, status: str, execution: dict[str, str], run_id: str) -> None:
    """One line in the job's Prefect log: where its MLflow run is."""
    from prefect.exceptions import MissingContextError
    from prefect.logging import get_run_logger

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


def record_not_run(job: Job, context: JobContext, reason: str,
                   status: str = "skipped") -> tuple[JobResult, JobOutcome]:
    """A job that will not run: recorded as skipped (or, refused by a worker, failed) with the reason."""

    job_dir = job_dir_for(job)
    if job_dir.exists():
        shutil.rmtree(job_dir)
    write_pending(job_dir, Execution(**context.execution), job, problem_type=context.problem_type,
                  metric=context.metric)
    result = JobResult(job_key=job.key, status=status, error=reason)
    result.save(job_dir)
    mark_result_final(job_dir)
    run_id = _record(job_dir)
    return result, JobOutcome(job_key=job.key, status=status, run_id=run_id, job_dir=str(job_dir))


# ---------------------------------------------------------------- embedded: jobs in this process


def max_parallel_jobs(budget: Budget, *, cpu_count: int | None = None, gpu_count: int | None = None) -> int:
    """Jobs that fit side by side: each takes budget.cores cores (and budget.gpus GPUs)."""
    cores = cpu_count or os.cpu_count() or 1
    parallel = max(1, cores // budget.cores)
    if budget.gpus:
        gpus = visible_gpu_count() if gpu_count is None else gpu_count
        if gpus >= budget.gpus:  # without enough GPUs the jobs are skipped quickly, so no limit
            parallel = min(parallel, gpus // budget.gpus)
    return parallel


def jobs_at_once(jobs: list[Job], parallel: int | None = None, *, cpu_count: int | None = None,
                 gpu_count: int | None = None) -> int:
    """How many of `jobs` an embedded run starts side by side: `parallel` when given, else as many as
    the largest budget allows (a scaling block's steps differ), and one at a time for a scaling
    block's jobs, so each step's fit time is its own."""
    budget = max((job.budget for job in jobs), key=lambda budget: (budget.cores, budget.gpus))
    if parallel is None and any(job.scaling is not None for job in jobs):
        parallel = 1
    return min(len(jobs), parallel or max_parallel_jobs(budget, cpu_count=cpu_count, gpu_count=gpu_count))


@task(name="run-job", task_run_name="{job_label}", cache_policy=NO_CACHE)
def run_one_job(job_dict: dict[str, Any], context: dict[str, Any], job_label: str = "",
                gpu_pool: GpuPool | None = None, progress: ProgressListener | None = None) -> JobOutcome:
    """One job of an embedded run: devices from the run's pool, then the shared per-job unit."""
    job = Job.from_dict(job_dict)
    if progress is not None:
        progress.job_started(job)
    devices = gpu_pool.take(job.budget.gpus) if gpu_pool is not None else None
    try:
        result, outcome = run_and_record(job, JobContext(**context), devices)
    finally:
        if gpu_pool is not None:
            gpu_pool.give_back(devices)
    if progress is not None:
        progress.job_finished(job, result)
    return outcome


class EmbeddedDispatcher:
    """Runs jobs in this process's threads, each in its own watched process; `parallel` at once
    (default: as many as the cores allow)."""

    __slots__ = ("parallel", "progress")  # not a plain object: Prefect stores it as a placeholder

    def __init__(self, progress: ProgressListener | None = None, parallel: int | None = None) -> None:
        self.progress = progress
        self.parallel = parallel

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (e.g. with the flow's context), it leaves its progress listener in this process.
        return (EmbeddedDispatcher, (None, self.parallel))

    def warm_up(self) -> None:
        """Start the warm fork server now, so its preload overlaps the data gates."""

        if chosen_launcher() == "warm":
            FORK_SERVER.warm_up()

    def planned(self, count: int) -> None:
        if self.progress is not None:
            self.progress.jobs_planned(count)

    def skip(self, job: Job, context: JobContext, reason: str) -> JobOutcome:
        result, outcome = record_not_run(job, context, reason)
        if self.progress is not None:
            self.progress.job_finished(job, result)
        return outcome

    def run(self, jobs: list[Job], contexts: dict[str, JobContext]) -> list[JobOutcome]:
        if not jobs:
            return []
        workers = jobs_at_once(jobs, self.parallel)
        gpu_pool = GpuPool(visible_gpu_ids()) if any(job.budget.gpus for job in jobs) else None
        outcomes: list[JobOutcome] = []
        task_runner: ThreadPoolTaskRunner[JobOutcome] = ThreadPoolTaskRunner(max_workers=workers)
        with task_runner as runner:
            futures = [
                runner.submit(run_one_job, parameters={
                    "job_dict": job.to_dict(), "context": contexts[job.key].__dict__,
                    "job_label": job.label, "gpu_pool": gpu_pool, "progress": self.progress,
                })
                for job in jobs
            ]
            for job, future in zip(jobs, futures, strict=True):
                try:
                    outcomes.append(future.result())
                except Exception as exc:  # a broken task must not stop the suite
                    logger.warning("job %s did not complete: %s", job.label, exc)
                    outcomes.append(JobOutcome(job_key=job.key, status="failed", run_id=None,
                                               job_dir=str(job_dir_for(job)), error=str(exc)))
        return outcomes
