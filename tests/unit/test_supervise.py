"""The typed files across the supervisor's process boundary, and what a worker process loads.

The supervisor's time, memory and tree kills are exercised through jobs (test_jobs_watchdog.py,
test_launch.py) and evaluations (test_evaluations_stage.py); here: the worker run for real in a
process of its own, and the JSON files that earlier versions wrote still reading.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from flows.dispatch import JobOutcome
from tasks.child_requests import JOB_FILE, EvaluationRequest, JobRequest
from tasks.plan import Job
from tasks.predictions import PREDICTION, ROW, TRUTH, proba_column
from tasks.results import PREDICTIONS_FILE, JobInfo, JobResult
from tasks.specs import Budget, DatasetSpec

REPO_ROOT = Path(__file__).resolve().parents[2]
BUDGET = Budget(name="test", time_s=5, cores=1, memory_mb=1024)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return make_project(tmp_path / "project", rows=60)


def _job(framework: str = "constant") -> Job:
    return Job("supervise", "tiny_binary", "v0", framework, None, 0, 0, BUDGET, {})


def _earlier_job_file(job: Job, spec: DatasetSpec) -> str:
    """job.json exactly as the harness wrote it before it was typed (a plain dict)."""
    payload = {
        "job_key": job.key, "job": job.to_dict(), "spec": spec.model_dump(), "params": {}, "cpus": [0],
        "threads": 1, "gpus": [], "hard_limit_s": 65.5, "latency_calls": 100, "latency_max_s": 3.0,
        "launched_unix": 1764800000.25, "python": "",
    }
    return json.dumps(payload, indent=2, default=str)


def test_the_worker_runs_a_job_without_mlflow_or_prefect(project: dict[str, DatasetSpec],
                                                         tmp_path: Path) -> None:
    """The worker is the harness's only code in a job's process: it must not load the tracking
    stack (seconds of import, and a store to reach) nor the orchestrator."""
    spec, job_dir = project["binary"], tmp_path / "job"
    job_dir.mkdir()
    JobRequest(job_key=_job().key, job=_job(), spec=spec, latency_calls=3).write(job_dir / JOB_FILE)
    probe = ("import json, sys\n"
             "from tasks import worker\n"
             f"code = worker.main(['tasks.worker', {str(job_dir)!r}])\n"
             "print(json.dumps({'code': code, 'loaded': sorted(name for name in sys.modules\n"
             "    if name.split('.')[0] in ('mlflow', 'prefect'))}))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    completed = subprocess.run([sys.executable, "-c", probe], cwd=job_dir, env=env, capture_output=True,
                               text=True, timeout=300, check=False)
    assert completed.returncode == 0, completed.stderr[-2000:]
    answer = json.loads(completed.stdout.strip().splitlines()[-1])
    assert answer == {"code": 0, "loaded": []}, JobResult.load(job_dir).error
    # What it wrote: the one definition of the prediction columns, and a typed info.
    table = pd.read_csv(job_dir / PREDICTIONS_FILE)
    info = JobResult.load(job_dir).typed_info()
    assert list(table.columns) == [ROW, TRUTH, PREDICTION, *(proba_column(c) for c in info.classes or [])]
    assert info.worker_usage is not None and info.worker_usage.peak_rss_mb > 0
    assert info.stage_started_unix is not None and "fitting" in info.stage_started_unix


def test_a_job_file_written_before_still_reads_and_writes_back_the_same(
    project: dict[str, DatasetSpec], tmp_path: Path
) -> None:
    spec, job = project["binary"], _job("hgb")
    earlier = tmp_path / JOB_FILE
    earlier.write_text(_earlier_job_file(job, spec))
    request = JobRequest.read(earlier)
    assert request.job == job and request.spec == spec and request.cpus == [0]
    assert request.hard_limit_s == 65.5 and request.latency_calls == 100
    again = request.write(tmp_path / "again.json")
    assert json.loads(again.read_text()) == json.loads(earlier.read_text())
    # An older file without the later fields reads with their defaults.
    minimal = {key: value for key, value in json.loads(earlier.read_text()).items()
               if key in ("job_key", "job", "spec")}
    assert JobRequest.from_json(minimal).latency_max_s == 3.0


def test_an_evaluation_request_round_trips(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    request = EvaluationRequest(name="explain", job=_job(), spec=project["binary"], job_dir=tmp_path,
                                settings={"enabled": True, "time_s": 60}, cores=[0, 1])
    read = EvaluationRequest.read(request.write(tmp_path / "request.json"))
    assert read == request and isinstance(read.job_dir, Path)


def test_job_info_keeps_the_frameworks_own_keys_and_writes_only_what_was_set() -> None:
    written = {"classes": ["no", "yes"], "launcher": "warm",
               "worker_usage": {"cpu_s": 1.5, "peak_rss_mb": 90.0},
               "leaderboard": [{"model": "m1", "score": 0.9}], "best_model": "m1"}
    info = JobInfo.model_validate(written)
    assert info.worker_usage is not None and info.worker_usage.cpu_s == 1.5
    assert (info.model_extra or {})["best_model"] == "m1"
    assert info.to_json() == written  # nothing unset appears, nothing of the framework's is lost
    info.timeline_s = {"scored": 1.0}
    assert info.to_json() == {**written, "timeline_s": {"scored": 1.0}}


def test_a_dispatch_outcome_reads_a_team_workers_answer() -> None:
    outcome = JobOutcome(job_key="k", status="ok", run_id="r", job_dir="/jobs/k", worker="w1", pid=7)
    answer = {**outcome.to_dict(), "result": {"job_key": "k"}, "a_later_field": 1}
    assert JobOutcome.from_dict(answer) == outcome


@pytest.mark.parametrize("module", ["tasks.worker", "tasks.evaluations.child"])
def test_a_child_module_loads_no_thread_pools_before_it_is_pinned(module: str) -> None:
    """A supervised child pins itself to its cores first: threads that numpy's BLAS or OpenMP start
    before the pin would run on every core. Importing the child's module must not load them."""
    probe = (f"import sys, {module}\n"
             "print(sorted(m for m in ('numpy', 'pandas', 'sklearn', 'pydantic', 'mlflow', 'prefect')\n"
             "    if m in sys.modules))\n")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    completed = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                               timeout=120, check=True)
    assert completed.stdout.strip() == "[]"
