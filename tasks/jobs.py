"""Run one job in its own process under the supervisor: time, memory, cores and GPUs enforced.

The child (``tasks.worker``, forked from the warm fork server or started cold: tasks/launch.py)
gets the budget's time as its search time; the supervisor (tasks/supervise.py) kills its whole
process tree (H2O's JVM included) at the hard limit

    hard_limit_s = time_s + GRACE_BASE_S + GRACE_SHARE * time_s + adapter.startup_grace_s

(the grace covers loading the fold, predicting, saving the model, up to 100 single-row latency calls
and a framework finishing its current model past its limit), or as soon as the tree's RSS passes
memory_mb (plus the loaded data's copy the worker declares in data_load.json). The parent hands
the job over as job.json (tasks/child_requests.py); the child writes its predictions, model and
result.json into JOB_DIR first; the parent then scores them (``tasks.metrics``), adds resource
figures and saves the final result.json.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pandas as pd

from tasks import resources
from tasks.anytime import ANYTIME_FILE
from tasks.child_process import error_tail
from tasks.child_requests import DATA_LOAD_FILE, JOB_FILE, DataLoad, JobRequest
from tasks.errors import UserError
from tasks.forecasting.scoring import score_predictions
from tasks.frameworks.base import FrameworkAdapter
from tasks.frameworks.environments import record_environment
from tasks.frameworks.registry import find_environment, get_adapter
from tasks.launch import WORKER_MODULE
from tasks.metrics import score
from tasks.plan import Job
from tasks.predictions import PREDICTION, TRUTH, proba_column
from tasks.results import (
    CURVE_INFO_KEY,
    MODEL_DIR,
    PREDICTIONS_FILE,
    RESULT_FILE,
    TRAINING_CURVE_FILE,
    JobInfo,
    JobResult,
    WorkerUsage,
)
from tasks.specs import DatasetSpec
from tasks.supervise import Child, Limits, Supervised, supervise
from tasks.worker import STAGE_FILE, WORK_DIR, now_utc

GRACE_BASE_S = 60.0
GRACE_SHARE = 0.10
# The in-process single-row latency: at most this many calls, and no more than this many seconds
# (the environment variables override both, e.g. to measure a slow client longer).
LATENCY_CALLS = 100
LATENCY_MAX_S = 3.0
LATENCY_CALLS_ENV = "AUTOML_EVAL_LATENCY_CALLS"
LATENCY_MAX_S_ENV = "AUTOML_EVAL_LATENCY_MAX_S"
LOG_FILE = "worker.log"


def grace_s(job: Job, adapter: FrameworkAdapter) -> float:
    return GRACE_BASE_S + GRACE_SHARE * job.budget.time_s + adapter.startup_grace_s


def _finish(result: JobResult, job_dir: Path, status: str, error: str = "") -> JobResult:
    result.status, result.error, result.ended_utc = status, error, now_utc()
    result.save(job_dir)
    return result


def _clear_previous_outputs(job_dir: Path) -> None:
    """A re-run starts clean: no stale result, predictions or model from an earlier try."""
    for name in (RESULT_FILE, PREDICTIONS_FILE, STAGE_FILE, LOG_FILE, DATA_LOAD_FILE, resources.SERIES_FILE,
                 TRAINING_CURVE_FILE, ANYTIME_FILE):
        (job_dir / name).unlink(missing_ok=True)
    for name in (MODEL_DIR, WORK_DIR):
        if (job_dir / name).is_dir():
            shutil.rmtree(job_dir / name, ignore_errors=True)


def _gpu_plan(job: Job, gpu_devices: list[int] | None, result: JobResult) -> tuple[list[int], str]:
    """The job's GPU devices, or a reason to skip it. Fills result.gpu and result.host."""
    needed = job.budget.gpus
    inventory = resources.gpu_inventory()
    result.gpu = {"available": inventory.available}
    if not inventory.available:
        result.gpu["reason"] = inventory.reason
    result.host = resources.host_info(None, inventory)
    if needed == 0:
        if inventory.available:
            result.gpu["devices"] = []
            result.gpu["reason"] = "the budget grants no GPU"
        return [], ""
    if not inventory.available:
        return [], f"budget '{job.budget.name}' asks for {needed} GPU(s) but here: {inventory.reason}."
    known = [d["index"] for d in inventory.devices]
    devices = list(gpu_devices) if gpu_devices is not None else known[:needed]
    if len(devices) < needed or any(d not in known for d in devices):
        return [], (f"budget '{job.budget.name}' asks for {needed} GPU(s) but only devices {devices} "
                    f"of {known} were granted.")
    result.gpu["devices"] = devices
    result.host = resources.host_info(devices, inventory)
    result.gpu["model"] = result.host["gpu_model"]
    return devices, ""


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"the worker died from signal {signal.Signals(-returncode).name}"
        except ValueError:
            return f"the worker died from signal {-returncode}"
    return f"the worker exited with code {returncode} without writing a result"


def _read(job_dir: Path, name: str) -> str:
    path = job_dir / name
    return path.read_text(errors="replace") if path.is_file() else ""


def _score(job_dir: Path, spec: DatasetSpec, classes: list[Any], fold: int) -> dict[str, float]:
    if spec.problem_type == "forecasting":
        return score_predictions(spec, fold, pd.read_csv(job_dir / PREDICTIONS_FILE))
    table = pd.read_csv(job_dir / PREDICTIONS_FILE, dtype={TRUTH: str, PREDICTION: str}
                        if spec.problem_type != "regression" else None)
    proba = None
    if spec.problem_type != "regression":
        proba = pd.DataFrame({str(c): table[proba_column(c)] for c in classes})
    return score(spec.problem_type, str(spec.metric), table[TRUTH], table[PREDICTION], proba, classes)


def _folder_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def run_job(
    job: Job,
    spec: DatasetSpec,
    job_dir: Path,
    *,
    gpu_devices: list[int] | None = None,
    cpu_cores: list[int] | None = None,
    grace_seconds: float | None = None,
) -> JobResult:
    """Run `job` in a child process under the watchdog and return its scored, costed result.

    `cpu_cores` pins the job (default: budget.cores cores from the process-wide pool);
    `gpu_devices` are NVML indices (default: the first budget.gpus devices); `grace_seconds`
    replaces the computed grace (tests use a short one).
    """
    entered = time.monotonic()
    job_dir = Path(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    _clear_previous_outputs(job_dir)
    result = JobResult(job_key=job.key, started_utc=now_utc())

    devices, skip_reason = _gpu_plan(job, gpu_devices, result)
    environment = None
    try:
        adapter = get_adapter(job.framework)
        params = {**(adapter.variant_params(job.variant) if job.variant else {}), **job.params}
        if job.framework_version:
            # The plan checked it (probe included); a folder gone since is this job's failure alone.
            environment = find_environment(job.framework, job.framework_version)
            environment.require_usable(probe=False)
    except (UserError, ValueError) as exc:
        return _finish(result, job_dir, "failed", str(exc))
    result.framework_version = environment.version if environment else adapter.version() or ""
    if skip_reason:
        return _finish(result, job_dir, "skipped", skip_reason)
    not_taken = adapter.applies_to(spec)  # the plan skips these; a job given directly is skipped here
    if not_taken:
        return _finish(result, job_dir, "skipped", not_taken)
    unavailable = None if environment else adapter.unavailable_reason()
    if unavailable:
        return _finish(result, job_dir, "failed", unavailable)

    leased = cpu_cores is None
    cores = resources.CORE_POOL.acquire(job.budget.cores) if leased else list(cpu_cores or [])
    hard_limit = job.budget.time_s + (grace_seconds if grace_seconds is not None else grace_s(job, adapter))
    request = JobRequest(
        job_key=job.key, job=job, spec=spec, params=params, cpus=cores,
        threads=len(cores) or job.budget.cores, gpus=devices, hard_limit_s=hard_limit,
        latency_calls=int(_latency_setting(LATENCY_CALLS_ENV, LATENCY_CALLS)),
        latency_max_s=_latency_setting(LATENCY_MAX_S_ENV, LATENCY_MAX_S),
        launched_unix=time.time(), python=str(environment.python) if environment else "",
    )
    request.write(job_dir / JOB_FILE)
    try:
        supervised = supervise(_worker_child(request, job_dir, environment.python if environment else None),
                               _limits(job, job_dir, hard_limit))
    finally:
        if leased:
            resources.CORE_POOL.release(cores)
    if environment is not None:
        record_environment(job_dir / MODEL_DIR, environment)
    return _complete(result, spec, job_dir, supervised, cores, entered, request.launched_unix, job.fold)


def _worker_child(request: JobRequest, job_dir: Path, python: Path | None) -> Child:
    """The job's worker: warm when it may be (tasks/launch.py), in its job folder, on its GPUs only."""
    return Child(module=WORKER_MODULE, folder=job_dir, log=job_dir / LOG_FILE, cwd=job_dir,
                 threads=request.threads, gpus=list(request.gpus), python=python, warm=True)


def _limits(job: Job, job_dir: Path, hard_limit: float) -> Limits:
    """The hard limit, and the budget's memory_mb plus the worker's copy of the fold's data (the
    budget is the framework's, not the harness's)."""
    memory_mb = job.budget.memory_mb

    def memory_reason(rss_mb: float, data_mb: float) -> str:
        data = f" plus the {data_mb:.0f} MB of its loaded data" if data_mb else ""
        return (f"killed by the watchdog: the job's processes used {rss_mb:.0f} MB, over the budget's "
                f"memory_mb {memory_mb}{data}")

    return Limits(
        time_s=hard_limit, memory_mb=memory_mb, memory_reason=memory_reason,
        timeout_reason=(f"killed by the watchdog at the hard limit of {hard_limit:.0f} s "
                        f"(budget time_s {job.budget.time_s} + grace)"),
        allowance_mb=lambda: _data_load_mb(job_dir),
    )


def _data_load_mb(job_dir: Path) -> float:
    """The memory the worker's loaded fold takes (it writes it once loaded), 0 before that."""
    try:
        return DataLoad.read(job_dir / DATA_LOAD_FILE).data_mb
    except (OSError, ValueError):  # not written yet, or being written: pydantic's errors are ValueErrors
        return 0.0


def _latency_setting(variable: str, default: float) -> float:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value <= 0:
        raise UserError(f"{variable}='{text}' is not a positive number; set it to one or unset it.")
    return value


def _complete(
    result: JobResult, spec: DatasetSpec, job_dir: Path, watched: Supervised, cores: list[int],
    entered: float, launched_unix: float, fold: int,
) -> JobResult:
    """Merge what the worker wrote with what the supervisor saw, score, save the final result."""
    host, gpu, started_utc = result.host, result.gpu, result.started_utc
    worker_wrote = (job_dir / RESULT_FILE).is_file()
    if worker_wrote:
        result = JobResult.load(job_dir)
        result.host, result.gpu, result.started_utc = host, gpu, started_utc
    info = result.typed_info()
    info.cores = cores
    info.launcher = watched.launcher

    stage = _read(job_dir, STAGE_FILE).strip()
    where = f" while {stage}" if stage and stage != "done" else ""
    log_tail = error_tail(_read(job_dir, LOG_FILE))
    status, error = result.status, result.error
    if watched.verdict is not None:
        status = watched.verdict.status
        error = f"{watched.verdict.reason}{where}.\n{log_tail}".strip()
    elif not worker_wrote:
        # The child could not even record its failure: a segfault, an abort, a broken import.
        status, error = "failed", f"{_describe_exit(watched.returncode)}{where}.\n{log_tail}".strip()
    elif status == "ok":
        try:
            result.scores = _score(job_dir, spec, info.classes or [], fold)
        except Exception as exc:  # noqa: BLE001 - predictions the harness cannot score fail the job
            status, error = "failed", f"scoring the predictions failed: {type(exc).__name__}: {exc}"
    # One instant ends both the job's wall time and its timeline, so "scored" is never past duration_s.
    scored_unix, duration_s = time.time(), time.monotonic() - entered
    result.costs = _costs(result, info, job_dir, watched, duration_s)
    stages = info.stage_started_unix or {}
    info.timeline_s = _timeline(stages, launched_unix, watched.exited_unix, scored_unix)
    _write_series(job_dir, info, watched, stages, launched_unix)
    # Kept in the timeline and the curve's file: the info loses both.
    result.info = {k: v for k, v in info.to_json().items() if k not in ("stage_started_unix", CURVE_INFO_KEY)}
    return _finish(result, job_dir, status, error)


def _write_series(job_dir: Path, info: JobInfo, watched: Supervised, stages: dict[str, float],
                  launched_unix: float) -> None:
    """The supervisor's samples as resources.csv, and a framework's training curve (when it records
    one) as training_curve.csv: the series `compare` aligns between two executions."""
    stages = {**stages, "worker exited": watched.exited_unix}
    samples = resources.series_frame(watched.sampler.series.samples, watched.gpu_samples, stages,
                                     launched_unix)
    if not samples.empty:
        samples.to_csv(job_dir / resources.SERIES_FILE, index=False)
    curve = (info.model_extra or {}).get(CURVE_INFO_KEY)
    if curve:
        pd.DataFrame(curve).to_csv(job_dir / TRAINING_CURVE_FILE, index=False)


def _costs(result: JobResult, info: JobInfo, job_dir: Path, watched: Supervised,
           duration_s: float) -> dict[str, float]:
    """The worker's timings plus what only the supervisor knows: wall time, memory, CPU, GPU."""
    usage = info.worker_usage or WorkerUsage()
    costs = dict(result.costs)
    costs["duration_s"] = duration_s
    costs["peak_rss_mb"] = max(watched.sampler.peak_rss_mb, usage.peak_rss_mb)
    costs["cpu_s"] = max(watched.sampler.cpu_s, usage.cpu_s)
    costs.update(watched.gpu_costs)
    measured = sum(costs.get(k, 0.0) for k in ("fit_s", "predict_s")) + (info.predict_proba_s or 0.0) + (
        info.latency_measure_s or 0.0)
    costs["overhead_s"] = max(0.0, duration_s - measured)
    if (job_dir / MODEL_DIR).is_dir():
        costs["model_size_mb"] = _folder_mb(job_dir / MODEL_DIR)
    return costs


def _timeline(stages: dict[str, float], launched_unix: float, exited_unix: float,
              scored_unix: float) -> dict[str, float]:
    """Seconds from the worker's launch to the start of each stage, its exit and its scoring:
    where a job's time outside the framework went."""
    timeline = {stage: round(at - launched_unix, 3) for stage, at in stages.items()}
    timeline["worker exited"] = round(exited_unix - launched_unix, 3)
    timeline["scored"] = round(scored_unix - launched_unix, 3)
    return timeline
