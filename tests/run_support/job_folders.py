"""Job folders as the dispatcher leaves them (model/, predictions.csv, result.json, tracking.json)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.frameworks.base import TaskInfo
from tasks.frameworks.constant import ADAPTER as CONSTANT
from tasks.frameworks.registry import write_model_identity
from tasks.plan import Job
from tasks.results import INPUT_EXAMPLE_FILE, MODEL_DIR, PREDICTIONS_FILE, JobResult
from tasks.specs import Budget
from tasks.tracking.execution import Execution
from tasks.tracking.job_folder import mark_result_final, write_pending

BUDGET = Budget(name="test", time_s=5, cores=1, memory_mb=1024)
# The job's own times as the harness writes them (a 42.5 s job, long before it is logged); each
# fold's job a minute after the previous one's, so jobs keep the order they ran in.
STARTED_UTC = "2026-01-02T03:04:05.250+00:00"
ENDED_UTC = "2026-01-02T03:04:47.750+00:00"


def job_times(fold: int) -> tuple[str, str]:
    from datetime import datetime, timedelta

    shift = timedelta(minutes=fold)
    return tuple((datetime.fromisoformat(t) + shift).isoformat(timespec="milliseconds")  # type: ignore[return-value]
                 for t in (STARTED_UTC, ENDED_UTC))


def make_job(fold: int = 0, framework: str = "constant") -> Job:
    return Job("unit", "toy", "abc123", framework, None, fold, 0, BUDGET, {"_note": "x", "depth": 3})


def write_job_folder(job_dir: Path, job: Job, status: str = "ok") -> JobResult:
    """What the worker leaves: model/ (with its identity files), predictions.csv, result.json."""
    job_dir.mkdir(parents=True, exist_ok=True)
    X = pd.DataFrame({"a": np.arange(12.0)})
    y = pd.Series(["yes", "no", "no"] * 4)
    task = TaskInfo("binary", "label", "auc", {"a": "numeric"}, ("no", "yes"))
    version = CONSTANT.version() or ""
    result = JobResult(job_key=job.key, status=status, framework_version=version,
                       host={"host": "h", "cpu_model": "cpu", "gpu_model": "none"},
                       started_utc=job_times(job.fold)[0], ended_utc=job_times(job.fold)[1])
    if status == "ok":
        model = CONSTANT.fit(X, y, task=task, budget=BUDGET, params={}, workdir=job_dir, seed=0)
        model.save(job_dir / MODEL_DIR)
        write_model_identity(job_dir / MODEL_DIR, CONSTANT, task)
        # The worker's table: row, truth, prediction, proba_<class>.
        table = pd.DataFrame({"row": np.arange(12), "truth": y, "prediction": model.predict(X)})
        for label, column in model.predict_proba(X).items():
            table[f"proba_{label}"] = column.to_numpy()
        table.to_csv(job_dir / PREDICTIONS_FILE, index=False)
        X.head(5).to_parquet(job_dir / INPUT_EXAMPLE_FILE, index=False)
        result.scores = {"auc": 0.5, "logloss": 0.64, "acc": 0.67, "balacc": 0.5, "f1": 0.0, "brier": 0.22,
                         "ece": 0.0, "result": 0.5}
        result.costs = {"fit_s": 0.01, "predict_s": 0.001, "peak_rss_mb": 50.0, "models_count": 1}
    else:
        result.error = "RuntimeError: boom"
    result.save(job_dir)
    return result


def finished_job_folder(job_dir: Path, execution: Execution, job: Job, status: str = "ok") -> Path:
    """A job folder as the dispatcher leaves it once the harness saved the final result."""
    write_pending(job_dir, execution, job, problem_type="binary", metric="auc")
    write_job_folder(job_dir, job, status)
    mark_result_final(job_dir)
    return job_dir
