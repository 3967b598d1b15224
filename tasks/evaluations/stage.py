"""The post-job stage: run a suite's enabled evaluations on a finished job's saved model.

Each evaluation runs in a process of its own (``python -m tasks.evaluations.child``), in its own
session, pinned to the job's cores and held to the job's memory, under its own time limit from
the suite's block (``time_s``, plus the evaluation's grace), never the search budget's. It writes
JOB_DIR/evaluations/NAME/ (result.json and its files) first; the job's result.json then carries a
summary per evaluation, so tracking logs it with the job. Nothing here can change the job's own
status: a failed, killed or crashed evaluation is recorded as such, and the suite goes on.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tasks import paths, resources
from tasks.evaluations.base import EvaluationResult
from tasks.evaluations.child import REQUEST_FILE
from tasks.evaluations.registry import get_evaluation
from tasks.launch import PACKAGE_ROOT, python_environment
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import DatasetSpec
from tasks.worker import error_tail

EVALUATIONS_DIR = "evaluations"  # JOB_DIR/evaluations/NAME/
LOG_FILE = "evaluation.log"
SAMPLE_INTERVAL_S = 0.25
FAILED = ("failed", "timeout", "memory")

logger = logging.getLogger("automl_eval.evaluations")


def evaluation_folder(job_dir: Path, name: str) -> Path:
    return job_dir / EVALUATIONS_DIR / name


def run_evaluations(job: Job, spec: DatasetSpec, job_dir: Path, result: JobResult,
                    blocks: dict[str, dict[str, Any]]) -> JobResult:
    """Run every enabled block's evaluation on the job in `job_dir`; returns the result with
    `evaluations` filled (and saved). `blocks` maps an evaluation name to its suite settings."""
    for name, block in blocks.items():
        if not block.get("enabled"):
            continue
        try:
            outcome = _evaluate(name, block, job, spec, job_dir, result)
        except Exception as exc:  # the stage itself broke: recorded, never the job's failure
            outcome = EvaluationResult(status="failed", reason=f"{type(exc).__name__}: {exc}")
        result.evaluations[name] = outcome.summary()
        logger.info("%s: %s %s%s", job.label, name, outcome.status,
                    f" ({outcome.reason.splitlines()[0]})" if outcome.reason else "")
    result.save(job_dir)
    return result


def _evaluate(name: str, block: dict[str, Any], job: Job, spec: DatasetSpec, job_dir: Path,
              result: JobResult) -> EvaluationResult:
    evaluation = get_evaluation(name)
    settings = evaluation.settings_model(**block)
    folder = evaluation_folder(job_dir, name)
    if folder.exists():
        shutil.rmtree(folder)  # an earlier attempt's files must not mix with this one's
    folder.mkdir(parents=True)
    if result.status != "ok":
        outcome = EvaluationResult(status="not applicable",
                                   reason=f"the job is {result.status}: there is no model to evaluate")
        outcome.save(folder)
        return outcome
    reason = evaluation.applies_to(spec, job.framework) or _made_elsewhere(job)
    if reason:
        outcome = EvaluationResult(status="not applicable", reason=reason)
        outcome.save(folder)
        return outcome

    cores = resources.CORE_POOL.acquire(job.budget.cores)
    try:
        request = {
            "name": name,
            "job": job.to_dict(),
            "spec": spec.model_dump(),
            "job_dir": str(job_dir),
            "settings": settings.model_dump(),
            "cores": cores,
        }
        (folder / REQUEST_FILE).write_text(json.dumps(request, indent=2, default=str))
        limit_s = settings.time_s + evaluation.grace_s
        verdict, returncode, wall_s = _watch(folder, len(cores) or job.budget.cores, job.budget.memory_mb,
                                             limit_s)
    finally:
        resources.CORE_POOL.release(cores)
    log = folder / LOG_FILE
    log_tail = error_tail(log.read_text(errors="replace")) if log.is_file() else ""
    if verdict is not None:
        status, why = verdict
        outcome = EvaluationResult.load(folder) if (folder / "result.json").is_file() else EvaluationResult(
            status=status)
        outcome.status, outcome.reason = status, f"{why}.\n{log_tail}".strip()  # type: ignore[assignment]
    elif (folder / "result.json").is_file():
        outcome = EvaluationResult.load(folder)
    else:
        outcome = EvaluationResult(
            status="failed", reason=f"the evaluation process exited with code {returncode} without a "
                                    f"result.\n{log_tail}".strip())
    outcome.wall_s = outcome.wall_s or wall_s
    if outcome.status in FAILED:
        evaluation.on_failure(outcome)
    outcome.save(folder)
    return outcome


def _made_elsewhere(job: Job) -> str | None:
    """Evaluations load the model in the main environment: one made in a framework environment of
    its own (another version of the framework) is not loaded there."""
    from tasks.frameworks.environments import MODEL_REQUIREMENTS_FILE
    from tasks.frameworks.registry import get_adapter

    if not job.framework_version or get_adapter(job.framework).version() == job.framework_version:
        return None
    return (f"the model was made in the framework environment {job.framework_id}, and post-job "
            "evaluations load models in the main environment, where the framework is at another version; "
            f"its requirements are in model/{MODEL_REQUIREMENTS_FILE}")


def _watch(folder: Path, threads: int, memory_mb: int,
           limit_s: float) -> tuple[tuple[str, str] | None, int, float]:
    """Run the child and watch it: (verdict when killed, exit code, wall seconds)."""
    env = python_environment(threads)
    env["AUTOML_EVAL_HOME"] = str(paths.project_root())
    started = time.monotonic()
    with open(folder / LOG_FILE, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", "tasks.evaluations.child", str(folder)], cwd=PACKAGE_ROOT, env=env,
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    sampler = resources.ProcessTreeSampler(child.pid)
    verdict: tuple[str, str] | None = None
    try:
        while True:
            try:
                child.wait(timeout=SAMPLE_INTERVAL_S)
                break
            except subprocess.TimeoutExpired:
                pass
            rss_mb = sampler.sample()
            if rss_mb > memory_mb:
                verdict = ("memory", f"killed: the evaluation's processes used {rss_mb:.0f} MB, over the "
                                     f"budget's memory_mb {memory_mb}")
            elif time.monotonic() - started > limit_s:
                verdict = ("timeout",
                           f"killed at the evaluation's limit of {limit_s:.0f} s (its time_s + grace)")
            if verdict:
                resources.kill_tree(child.pid)
                break
    finally:
        if child.poll() is None:
            resources.kill_tree(child.pid)
        child.wait()
        # Servers and load generators it started go too: its process group and anything seen in its tree.
        resources.kill_group(child.pid)
        leftovers = sampler.leftovers()
        if leftovers:
            resources.kill_tree(child.pid, also=leftovers)
    return verdict, child.returncode, time.monotonic() - started
