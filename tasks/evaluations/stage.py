"""The post-job stage: run a suite's enabled evaluations on a finished job's saved model.

Each evaluation runs in a process of its own (``python -m tasks.evaluations.child``), in its own
session, pinned to the job's cores and held to the job's memory by the supervisor that watches
jobs too (tasks/supervise.py), under its own time limit from the suite's block (``time_s``, plus
the evaluation's grace), never the search budget's. It writes
JOB_DIR/evaluations/NAME/ (result.json and its files) first; the job's result.json then carries a
summary per evaluation, so tracking logs it with the job. Nothing here can change the job's own
status: a failed, killed or crashed evaluation is recorded as such, and the suite goes on.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

from tasks import resources
from tasks.child_process import error_tail
from tasks.child_requests import REQUEST_FILE, EvaluationRequest
from tasks.evaluations.base import EvaluationResult
from tasks.evaluations.by_modality import evaluations_of
from tasks.evaluations.registry import get_evaluation
from tasks.frameworks.environments import MODEL_REQUIREMENTS_FILE
from tasks.frameworks.registry import get_adapter
from tasks.launch import PACKAGE_ROOT
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import DatasetSpec
from tasks.supervise import Child, Limits, supervise

EVALUATIONS_DIR = "evaluations"  # JOB_DIR/evaluations/NAME/
LOG_FILE = "evaluation.log"
CHILD_MODULE = "tasks.evaluations.child"
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
    reason = (evaluation.applies_to(spec, job.framework)
              or evaluations_of(spec.modality).not_applicable.get(name) or _made_elsewhere(job))
    if reason:
        outcome = EvaluationResult(status="not applicable", reason=reason)
        outcome.save(folder)
        return outcome

    cores = resources.CORE_POOL.acquire(job.budget.cores)
    try:
        EvaluationRequest(name=name, job=job, spec=spec, job_dir=job_dir, settings=settings.model_dump(),
                          cores=cores).write(folder / REQUEST_FILE)
        limit_s = settings.time_s + evaluation.grace_s
        child = Child(module=CHILD_MODULE, folder=folder, log=folder / LOG_FILE, cwd=PACKAGE_ROOT,
                      threads=len(cores) or job.budget.cores)
        supervised = supervise(child, _limits(job.budget.memory_mb, limit_s))
    finally:
        resources.CORE_POOL.release(cores)
    verdict, returncode, wall_s = supervised.verdict, supervised.returncode, supervised.wall_s
    log = folder / LOG_FILE
    log_tail = error_tail(log.read_text(errors="replace")) if log.is_file() else ""
    if verdict is not None:
        outcome = EvaluationResult.load(folder) if (folder / "result.json").is_file() else EvaluationResult(
            status=verdict.status)
        outcome.status, outcome.reason = verdict.status, f"{verdict.reason}.\n{log_tail}".strip()
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
    if not job.framework_version or get_adapter(job.framework).version() == job.framework_version:
        return None
    return (f"the model was made in the framework environment {job.framework_id}, and post-job "
            "evaluations load models in the main environment, where the framework is at another version; "
            f"its requirements are in model/{MODEL_REQUIREMENTS_FILE}")


def _limits(memory_mb: int, limit_s: float) -> Limits:
    """The job's memory_mb for the whole evaluation (its servers and load generators included), and
    the evaluation's own time limit."""

    def memory_reason(rss_mb: float, _allowance_mb: float) -> str:
        return (f"killed: the evaluation's processes used {rss_mb:.0f} MB, over the budget's "
                f"memory_mb {memory_mb}")

    return Limits(time_s=limit_s, memory_mb=memory_mb, memory_reason=memory_reason,
                  timeout_reason=f"killed at the evaluation's limit of {limit_s:.0f} s (its time_s + grace)")
