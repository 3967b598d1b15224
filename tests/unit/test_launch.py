"""The warm fork server: what happens when it, or the harness, goes away, or cannot start.

Real processes throughout: a server killed mid-job, a harness killed mid-job, a server that
fails its preload, and a bad AUTOML_EVAL_LAUNCHER.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from jobs_support import misbehaving_adapter
from jobs_support.tiny_project import make_project

from tasks import launch
from tasks.frameworks.registry import EXTRA_ADAPTERS_ENV
from tasks.jobs import LOG_FILE, run_job
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import Budget, DatasetSpec
from tasks.worker import STAGE_FILE

BUDGET = Budget(name="launch", time_s=2, cores=1, memory_mb=2000)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    monkeypatch.setenv(EXTRA_ADAPTERS_ENV, misbehaving_adapter.__file__)
    monkeypatch.setenv(launch.LAUNCHER_ENV, "warm")
    return make_project(tmp_path / "project", rows=60)


def _job(variant: str) -> Job:
    return Job("launch", "tiny_binary", "v0", "misbehave", variant, 0, 0, BUDGET, {})


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def _wait_until(check: object, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


def _fitting(job_dir: Path) -> bool:
    stage = job_dir / STAGE_FILE
    return stage.is_file() and stage.read_text() == "fitting"


def test_a_server_that_dies_mid_job_fails_that_job_only(
    project: dict[str, DatasetSpec], tmp_path: Path
) -> None:
    job_dir = tmp_path / "runs" / "sleeper"
    outcome: list[JobResult] = []
    runner = threading.Thread(target=lambda: outcome.append(
        run_job(_job("sleep"), project["binary"], job_dir, grace_seconds=60)))
    runner.start()
    assert _wait_until(lambda: _fitting(job_dir))
    server_pid = launch.FORK_SERVER.pid
    assert server_pid is not None
    worker_pid = psutil.Process(server_pid).children()[0].pid
    os.kill(server_pid, signal.SIGKILL)
    runner.join(timeout=30)
    assert not runner.is_alive()

    (result,) = outcome
    assert result.status == "failed"
    assert "SIGKILL" in result.error and "fork server exited" in result.error
    assert "while fitting" in result.error
    assert _wait_until(lambda: _gone(worker_pid), 5)

    # The next job starts a fresh server and runs as usual.
    after = run_job(_job("ok"), project["binary"], tmp_path / "runs" / "after")
    assert after.status == "ok" and after.info["launcher"] == "warm"
    assert launch.FORK_SERVER.pid not in (None, server_pid)


HARNESS = """
import sys, threading, time
from pathlib import Path
from jobs_support.tiny_project import make_project
from tasks import launch
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.specs import Budget

root = Path(sys.argv[1])
spec = make_project(root / "project", rows=60)["binary"]
job = Job("launch", "tiny_binary", "v0", "misbehave", "sleep", 0, 0,
          Budget(name="launch", time_s=2, cores=1, memory_mb=2000), {})
job_dir = root / "runs" / "orphaned"
threading.Thread(target=run_job, args=(job, spec, job_dir), kwargs={"grace_seconds": 600},
                 daemon=True).start()
while not ((job_dir / "stage.txt").is_file() and (job_dir / "stage.txt").read_text() == "fitting"):
    time.sleep(0.1)
print(launch.FORK_SERVER.pid, flush=True)
time.sleep(600)
"""


def test_no_job_outlives_a_harness_that_is_killed(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(tmp_path)], env=env,
                               stdout=subprocess.PIPE, text=True)
    try:
        assert harness.stdout is not None
        server_pid = int(harness.stdout.readline())
        worker_pid = psutil.Process(server_pid).children()[0].pid
    finally:
        harness.kill()
        harness.wait()
    # No harness: the server sees its input close, and takes its workers with it.
    assert _wait_until(lambda: _gone(server_pid) and _gone(worker_pid), 15)


def test_a_server_that_cannot_start_falls_back_to_cold(
    project: dict[str, DatasetSpec], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "SERVER_MODULE", "tasks.no_such_server")
    monkeypatch.setattr(launch, "FORK_SERVER", launch.ForkServer())
    job_dir = tmp_path / "runs" / "fallback"
    result = run_job(_job("ok"), project["binary"], job_dir)
    assert result.status == "ok" and result.info["launcher"] == "cold"
    log = (job_dir / LOG_FILE).read_text()
    assert "the warm fork server did not start" in log and "tasks.no_such_server" in log


def test_a_bad_launcher_setting_is_one_sentence() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "flows.cli", "run", "smoke"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
        env={**os.environ, launch.LAUNCHER_ENV: "lukewarm"},
    )
    assert completed.returncode == 2
    assert "AUTOML_EVAL_LAUNCHER='lukewarm' is not a launcher" in completed.stderr
    assert "Traceback" not in completed.stderr + completed.stdout
