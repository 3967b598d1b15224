"""The offline record in each job folder: `tracking.json`, from pending to logged.

Written before the job runs (which execution and job, so the folder can be logged even if the
process dies), marked final once the harness saved the job's result, and given the run id once
logged. A final folder without a run id is pending: `sync` (or the breaker) logs it later.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from tasks import paths
from tasks.plan import Job
from tasks.results import RESULT_FILE
from tasks.tracking.execution import Execution, write_json

TRACKING_FILE = "tracking.json"  # in each job folder: execution id, job, and the run once logged


def write_pending(job_dir: Path, execution: Execution, job: Job, *, problem_type: str, metric: str) -> None:
    """Before the job runs: enough to log its folder later even if this process dies."""
    job_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "execution": execution.__dict__,
        "job": job.to_dict(),
        "problem_type": problem_type,
        "metric": metric,
        "result_final": False,
        "run_id": None,
    }
    write_json(job_dir / TRACKING_FILE, record)


def mark_result_final(job_dir: Path) -> None:
    """After the harness scored and saved the result: from now on the folder can be logged as it is.

    (The worker writes a first result.json itself; only the harness's final one may be recorded.)
    """
    _update_record(job_dir, result_final=True, finished_at=time.time())


def mark_logged(job_dir: Path, run_id: str) -> None:
    """The folder's job is recorded in this run: it is no longer pending."""
    _update_record(job_dir, run_id=run_id, waiting=None)


def mark_waiting(job_dir: Path, reason: str) -> None:
    """The result stays on disk for now: `tracking.json` says why, and `automl-eval sync` logs it."""
    _update_record(job_dir, waiting=reason)


def waiting_reason(job_dir: Path) -> str:
    """Why a pending job folder was not logged yet ("" when no attempt failed)."""
    try:
        return str(json.loads((job_dir / TRACKING_FILE).read_text()).get("waiting") or "")
    except (OSError, json.JSONDecodeError):
        return ""


def _update_record(job_dir: Path, **fields: Any) -> None:
    path = job_dir / TRACKING_FILE
    if path.is_file():
        record = json.loads(path.read_text())
        record.update(fields)
        write_json(path, record)


def pending_job_dirs(root: Path | None = None) -> list[Path]:
    """Job folders whose job finished (final result.json) but whose record was never logged.

    A folder whose job was cut short (the process running it died) is not pending: the job did not
    finish, so the next run of its execution runs it again.
    """
    root = root or paths.runs_dir()
    pending: list[tuple[float, Path]] = []
    for record_path in sorted(root.glob(f"**/{TRACKING_FILE}")):
        job_dir = record_path.parent
        try:
            record = json.loads(record_path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if record.get("result_final") and not record.get("run_id") and (job_dir / RESULT_FILE).is_file():
            pending.append((float(record.get("finished_at") or 0.0), job_dir))
    return [job_dir for _, job_dir in sorted(pending)]  # in the order the jobs finished


def folder_execution(job_dir: Path) -> Execution:
    """The execution a job folder belongs to, from its `tracking.json`."""
    return Execution(**read_record(job_dir)["execution"])


def read_record(job_dir: Path) -> dict[str, Any]:
    """The folder's `tracking.json` as written: execution, job, problem type, metric, run id."""
    return json.loads((job_dir / TRACKING_FILE).read_text())
