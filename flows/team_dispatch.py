"""Team mode: a suite's jobs fan out as flow runs of the `job` deployment, one per job.

Any worker of the pool may take any job, so several machines share a suite. Jobs whose budget asks
for GPUs go to the `gpu` pool, where the Prefect global concurrency limit `gpu` (one slot per GPU of
the pool) guards them and each job locks its own devices on its host. The job flow
(`flows/deployments.py:job`) runs `flows.dispatch.run_one_job`, the very unit embedded mode runs
in-process, so both modes run and record a job the same way.

Which mode runs is decided in one place, `flows.dispatch.execute_jobs`, by `team_mode()` below.
"""

from __future__ import annotations

import fcntl
import logging
import os
import platform
import time
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any
from uuid import UUID

from tasks.errors import UserError
from tasks.plan import Job
from tasks.results import RESULT_FILE, JobResult

logger = logging.getLogger("automl_eval.team")

MODE_ENV = "AUTOML_EVAL_MODE"
WORKER_NAME_ENV = "AUTOML_EVAL_WORKER_NAME"
JOB_FLOW = "automl-eval-job"
CPU_JOB_DEPLOYMENT = f"{JOB_FLOW}/job"
GPU_JOB_DEPLOYMENT = f"{JOB_FLOW}/job-gpu"
GPU_LIMIT = "gpu"
GPU_POOL = "gpu"
POLL_S = 2.0
# A job flow run a worker took (PENDING) but never started for this long is taken as lost.
PENDING_LOST_S = 300


def team_mode() -> bool:
    """Team mode when asked for: AUTOML_EVAL_MODE=team (the team stack sets it for its workers)."""
    return os.environ.get(MODE_ENV, "").strip().lower() == "team"


def worker_identity() -> dict[str, str]:
    """Which worker runs this process: its name (set per worker), host and process id."""
    return {
        "worker": os.environ.get(WORKER_NAME_ENV) or f"{platform.node()}:{os.getppid()}",
        "host": platform.node(),
        "pid": str(os.getpid()),
    }


# ---------------------------------------------------------------- the worker side: one job


class _LockedDevices:
    """Hands run_one_job exactly the devices this job locked (same duck type as dispatch.GpuPool)."""

    def __init__(self, devices: list[int]) -> None:
        self._devices = devices

    def take(self, count: int) -> list[int] | None:
        # [] (never None) when this host could not lock enough: the runner then skips the job with
        # the reason, instead of falling back to devices another job holds.
        return self._devices[:count] if len(self._devices) >= count else []

    def give_back(self, devices: list[int] | None) -> None:
        """The file locks are released by the job flow when it ends."""


@contextmanager
def host_devices(count: int, lock_dir: Path, timeout_s: float = 3600):  # noqa: ANN201
    """Lock `count` of this host's GPUs for this process (file locks, so two workers on one host
    never share a device); yields their indices, or [] when the host has fewer than asked."""
    from flows.dispatch import visible_gpu_count

    available = visible_gpu_count()
    if count <= 0 or available < count:
        yield []
        return
    lock_dir.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + timeout_s
    with ExitStack() as stack:
        taken: list[int] = []
        while len(taken) < count:
            for device in range(available):
                if device in taken:
                    continue
                handle = stack.enter_context((lock_dir / f"gpu{device}.lock").open("w"))
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                taken.append(device)
                if len(taken) == count:
                    break
            if len(taken) < count:
                if time.monotonic() > deadline:
                    break
                time.sleep(1)
        yield taken if len(taken) == count else []


def run_job_on_worker(job_dict: dict[str, Any], context: dict[str, Any], label: str) -> dict[str, Any]:
    """The job flow's body: GPU slot and devices if asked, then the shared per-job unit."""
    from flows import dispatch
    from tasks.launch import LAUNCHER_ENV

    job = Job.from_dict(job_dict)
    # A job flow run is a process for one job: a warm fork server would preload for a single fork.
    os.environ.setdefault(LAUNCHER_ENV, "cold")
    identity = worker_identity()
    _tag_own_flow_run([f"{key}:{value}" for key, value in identity.items()])
    with ExitStack() as stack:
        if job.budget.gpus:
            from prefect.concurrency.sync import concurrency

            stack.enter_context(concurrency(GPU_LIMIT, occupy=job.budget.gpus, strict=True))
            lock_dir = Path(os.environ.get("AUTOML_EVAL_GPU_LOCKS", "/tmp/automl-eval-gpu-locks"))
            devices = stack.enter_context(host_devices(job.budget.gpus, lock_dir))
            # No devices here: run_one_job's runner then records the job as skipped with the reason.
            dispatch._gpu_pool = _LockedDevices(devices)  # type: ignore[assignment]
        outcome = dispatch.run_one_job(job_dict, context, label)
    job_dir = Path(outcome["job_dir"])
    result = asdict(JobResult.load(job_dir)) if (job_dir / RESULT_FILE).is_file() else None
    return {**outcome, **identity, "result": result}


def _tag_own_flow_run(tags: list[str]) -> None:
    try:
        from prefect.client.orchestration import get_client
        from prefect.runtime import flow_run

        if not flow_run.id:
            return
        with get_client(sync_client=True) as client:
            current = client.read_flow_run(UUID(flow_run.id))
            client.update_flow_run(current.id, tags=sorted({*current.tags, *tags}))
    except Exception as exc:  # a missing tag must not fail the job
        logger.warning("could not tag the job's flow run: %s", exc)


# ---------------------------------------------------------------- the suite side: fan out, wait


def _require_api_url() -> str:
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise UserError(f"{MODE_ENV}=team needs a Prefect server: set PREFECT_API_URL "
                        "(e.g. `source .team/client.env` after `make team-up`).")
    return str(url)


def gpu_unavailable_reason(client: Any, gpus: int) -> str:
    """Why GPU jobs cannot run on this team, or '' when they can."""
    from prefect.exceptions import ObjectNotFound

    try:
        limit = client.read_global_concurrency_limit_by_name(GPU_LIMIT)
    except ObjectNotFound:
        return (f"no GPU in the team: the Prefect concurrency limit '{GPU_LIMIT}' is missing; "
                "start GPU workers and run `automl-eval deploy --gpus N`.")
    if limit.limit < gpus:
        return (f"no GPU for this job: it asks for {gpus} GPU(s) and the team's concurrency limit "
                f"'{GPU_LIMIT}' allows {limit.limit}; add GPU workers and run `automl-eval deploy --gpus N`.")
    workers = client.read_workers_for_work_pool(GPU_POOL)
    if not any(str(worker.status).upper().endswith("ONLINE") for worker in workers):
        return f"no GPU for this job: no worker of work pool '{GPU_POOL}' is online; start one on a GPU host."
    return ""


def _check_deployment(client: Any, name: str) -> None:
    from prefect.exceptions import ObjectNotFound

    try:
        client.read_deployment_by_name(name)
    except ObjectNotFound:
        raise UserError(f"the Prefect server has no deployment '{name}'; run `automl-eval deploy` first.") \
            from None


def submit_to_pools(jobs: list[Job], contexts: dict[str, Any]) -> list[dict[str, Any]]:
    """Create one flow run per job, wait for all of them, return one outcome per job (in order)."""
    from prefect.client.orchestration import get_client
    from prefect.deployments import run_deployment

    from flows.dispatch import record_skipped_job

    _require_api_url()
    outcomes: dict[str, dict[str, Any]] = {}
    runs: dict[str, tuple[Job, UUID]] = {}
    with get_client(sync_client=True) as client:
        _check_deployment(client, CPU_JOB_DEPLOYMENT)
        gpu_jobs = [job for job in jobs if job.budget.gpus]
        gpu_reasons: dict[int, str] = {}
        for gpus in sorted({job.budget.gpus for job in gpu_jobs}):
            gpu_reasons[gpus] = gpu_unavailable_reason(client, gpus)
        if gpu_jobs and not all(gpu_reasons.values()):
            _check_deployment(client, GPU_JOB_DEPLOYMENT)
        try:
            for job in jobs:
                reason = gpu_reasons.get(job.budget.gpus, "")
                if reason:
                    outcomes[job.key] = record_skipped_job(job, contexts[job.key], reason)
                    continue
                flow_run = run_deployment(
                    GPU_JOB_DEPLOYMENT if job.budget.gpus else CPU_JOB_DEPLOYMENT,
                    parameters={"job": job.to_dict(), "context": _plain(contexts[job.key]),
                                "label": job.label},
                    flow_run_name=job.label, tags=[f"job_key:{job.key}", f"suite:{job.suite}"],
                    timeout=0,
                )
                runs[job.key] = (job, flow_run.id)
            outcomes.update(_wait_for(client, runs, contexts))
        except BaseException:
            _cancel_unfinished(client, [run_id for key, (_, run_id) in runs.items() if key not in outcomes])
            raise
    return [outcomes[job.key] for job in jobs]


def _plain(context: Any) -> dict[str, Any]:
    return dict(context.__dict__) if hasattr(context, "__dict__") else dict(context)


def _wait_for(client: Any, runs: dict[str, tuple[Job, UUID]],
              contexts: dict[str, Any]) -> dict[str, dict[str, Any]]:
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    outcomes: dict[str, dict[str, Any]] = {}
    by_id = {run_id: job for job, run_id in runs.values()}
    pending_since: dict[UUID, float] = {}
    started: set[UUID] = set()
    while len(outcomes) < len(runs):
        pending = [run_id for run_id, job in by_id.items() if job.key not in outcomes]
        by_filter = FlowRunFilter(id=FlowRunFilterId(any_=pending))
        for flow_run in client.read_flow_runs(flow_run_filter=by_filter, limit=len(pending)):
            job = by_id[flow_run.id]
            state = flow_run.state
            if state is not None and state.is_final():
                outcomes[job.key] = _outcome(job, flow_run, contexts[job.key])
                _tell_listener(job, outcomes[job.key], started=flow_run.id in started)
                continue
            if state is not None and state.is_running() and flow_run.id not in started:
                started.add(flow_run.id)
                _tell_listener(job, None, started=False)
            lost = ""
            if state is not None and state.is_running():
                lost = _lost_reason(client, flow_run)
            elif state is not None and state.is_pending():
                # Taken by a worker but never started: that worker died between the two.
                waited = time.monotonic() - pending_since.setdefault(flow_run.id, time.monotonic())
                if waited > PENDING_LOST_S:
                    lost = f"lost: the job was taken by a worker but did not start within {PENDING_LOST_S} s"
            if lost:
                fresh = client.read_flow_run(flow_run.id)  # it may have just finished after all
                if fresh.state is not None and fresh.state.is_final():
                    outcomes[job.key] = _outcome(job, fresh, contexts[job.key])
                    continue
                _cancel_unfinished(client, [flow_run.id])
                outcomes[job.key] = _record_failure(job, contexts[job.key], lost)
                _tell_listener(job, outcomes[job.key], started=flow_run.id in started)
        if len(outcomes) < len(runs):
            time.sleep(POLL_S)
    return outcomes


def _tell_listener(job: Job, outcome: dict[str, Any] | None, *, started: bool) -> None:
    """Progress for the CLI's bar, as embedded mode gives it: started once, then finished."""
    from flows import dispatch

    listener = dispatch._listener
    if listener is None:
        return
    if outcome is None or not started:
        listener.job_started(job)
    if outcome is not None:
        job_dir = Path(outcome.get("job_dir") or dispatch.job_dir_for(job))
        result = (JobResult.load(job_dir) if (job_dir / RESULT_FILE).is_file()
                  else JobResult(job_key=job.key, status=str(outcome.get("status", "failed"))))
        listener.job_finished(job, result)


def _tag_value(tags: list[str], name: str) -> str:
    return next((tag.split(":", 1)[1] for tag in tags if tag.startswith(f"{name}:")), "")


def _lost_reason(client: Any, flow_run: Any) -> str:
    """Why a running job will never report back, or ''. On this host a dead process says so at
    once; on another host, its worker going offline in Prefect (missed heartbeats) does."""
    host, pid = _tag_value(flow_run.tags, "host"), _tag_value(flow_run.tags, "pid")
    worker = _tag_value(flow_run.tags, "worker")
    if host == platform.node() and pid.isdigit() and not _process_alive(int(pid)):
        return f"lost: the job's process on worker {worker or host} ended without a result (worker stopped?)"
    if worker and flow_run.work_pool_name:
        try:
            workers = client.read_workers_for_work_pool(flow_run.work_pool_name)
        except Exception:  # the server is busy: ask again at the next poll
            return ""
        match = [w for w in workers if w.name == worker]
        if match and str(match[0].status).upper().endswith("OFFLINE"):
            return f"lost: worker {worker} went offline while running the job"
    return ""


def _process_alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _outcome(job: Job, flow_run: Any, context: Any) -> dict[str, Any]:
    from flows.dispatch import job_dir_for

    state = flow_run.state
    if state.is_completed():
        try:
            returned = state.result(raise_on_failure=False)
        except Exception as exc:  # results kept on another host without shared storage
            logger.info("result of %s not readable here (%s); MLflow has it.", job.label, exc)
            returned = None
        if isinstance(returned, dict):
            local_dir = job_dir_for(job)
            local = asdict(JobResult.load(local_dir)) if (local_dir / RESULT_FILE).is_file() else None
            if returned.get("result") and local != returned["result"]:
                # The job ran on another machine: keep its result here for the suite's leaderboard.
                local_dir.mkdir(parents=True, exist_ok=True)
                JobResult(**returned["result"]).save(local_dir)
            return {key: value for key, value in returned.items() if key != "result"}
        return {"job_key": job.key, "status": "unknown", "run_id": None, "job_dir": str(job_dir_for(job)),
                "worker": _tag_value(flow_run.tags, "worker")}
    reason = f"the job's flow run ended {state.type.value}: {state.message or 'no message'}"
    return _record_failure(job, context, reason)


def _record_failure(job: Job, context: Any, reason: str) -> dict[str, Any]:
    """A job whose flow run failed or was lost is recorded as failed, so `--retry-failed` finds it.

    The job folder is keyed by job, not by execution: what an earlier execution left there is
    replaced; a result this execution's job wrote before it was lost is kept and recorded."""
    import shutil

    from flows.dispatch import job_dir_for, record_job
    from tasks.tracking.log import TRACKING_FILE, Execution, write_pending

    job_dir = job_dir_for(job)
    if not (_belongs_to(job_dir / TRACKING_FILE, context) and (job_dir / RESULT_FILE).is_file()):
        shutil.rmtree(job_dir, ignore_errors=True)
        write_pending(job_dir, Execution(**context.execution), job, problem_type=context.problem_type,
                      metric=context.metric)
        JobResult(job_key=job.key, status="failed", error=reason).save(job_dir)
    try:
        run_id = record_job(str(job_dir))
    except Exception as exc:
        logger.warning("could not record %s (%s); it waits on disk.", job.label, exc)
        run_id = None
    status = JobResult.load(job_dir).status
    return {"job_key": job.key, "status": status, "run_id": run_id, "job_dir": str(job_dir),
            "error": reason}


def _belongs_to(tracking_file: Path, context: Any) -> bool:
    """Whether a job folder's record was written for this execution (not left by an earlier one)."""
    import json

    try:
        record = json.loads(tracking_file.read_text())
    except (OSError, ValueError):
        return False
    return record.get("execution", {}).get("execution_id") == context.execution.get("execution_id")


def _cancel_unfinished(client: Any, run_ids: list[UUID]) -> None:
    from prefect.states import Cancelling

    for run_id in run_ids:
        try:
            client.set_flow_run_state(run_id, Cancelling(message="the suite stopped"), force=True)
        except Exception as exc:
            logger.warning("could not cancel flow run %s: %s", run_id, exc)
