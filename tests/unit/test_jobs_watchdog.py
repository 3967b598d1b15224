"""The watchdog: every way a job can go wrong gets its status, and the jobs after it still run.

A test-only adapter (tests/jobs_support/misbehaving_adapter.py, added through
AUTOML_EVAL_EXTRA_ADAPTERS) sleeps past its budget, allocates past its memory limit, aborts,
raises, or starts a helper process and overruns. Real child processes, real kills. Every test
runs with workers forked from the warm fork server and with workers started cold.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest
from jobs_support import misbehaving_adapter
from jobs_support.tiny_project import make_project

from tasks.frameworks.registry import EXTRA_ADAPTERS_ENV
from tasks.jobs import run_job
from tasks.launch import LAUNCHER_ENV
from tasks.plan import Job
from tasks.resources import NO_GPU, SERIES_FILE, SERIES_STAGE, SERIES_TIME, gpu_inventory
from tasks.results import MODEL_DIR, PREDICTIONS_FILE, RESULT_FILE, JobResult
from tasks.specs import Budget, DatasetSpec
from tasks.vocabulary import COST_METRICS, RESULT, SCORE_METRICS

# Short limits so a misbehaving job is stopped within seconds; a python worker with pandas
# loaded is ~150-250 MB, so 700 MB leaves the 'ok' job room and the allocating one none.
BUDGET = Budget(name="watchdog", time_s=2, cores=1, memory_mb=700)
GRACE_S = 4.0


@pytest.fixture(params=["warm", "cold"], autouse=True)
def launcher(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(LAUNCHER_ENV, request.param)
    return str(request.param)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    monkeypatch.setenv(EXTRA_ADAPTERS_ENV, misbehaving_adapter.__file__)
    return make_project(tmp_path / "project", rows=60)


def _job(variant: str, budget: Budget = BUDGET, framework: str = "misbehave") -> Job:
    return Job("watchdog", "tiny_binary", "v0", framework, variant, 0, 0, budget, {})


def test_a_suite_of_misbehaving_jobs_gets_each_status_and_goes_on(
    project: dict[str, DatasetSpec], tmp_path: Path, launcher: str
) -> None:
    expected = [("ok", "ok"), ("sleep", "timeout"), ("allocate", "memory"), ("abort", "failed"),
                ("raise", "failed"), ("ok", "ok")]
    results: list[JobResult] = []
    for index, (variant, _) in enumerate(expected):
        job_dir = tmp_path / "runs" / f"{index}-{variant}"
        results.append(run_job(_job(variant), project["binary"], job_dir, grace_seconds=GRACE_S))
    assert [r.status for r in results] == [status for _, status in expected]
    assert {r.info["launcher"] for r in results} == {launcher}

    ok, timeout, memory, abort, raised, _ = results
    assert "hard limit" in timeout.error and "while fitting" in timeout.error
    assert misbehaving_adapter.SLEEP_MESSAGE in timeout.error  # the log's last lines, not lost in a buffer
    assert "memory_mb 700" in memory.error and memory.costs["peak_rss_mb"] > BUDGET.memory_mb
    assert "SIGABRT" in abort.error
    assert raised.error.startswith("RuntimeError: " + misbehaving_adapter.ERROR_MESSAGE)
    assert "Traceback" in raised.error  # the last lines of the error, not just its name

    # What a finished job leaves on disk, and that the saved result is the returned one.
    ok_dir = tmp_path / "runs" / "0-ok"
    assert (ok_dir / PREDICTIONS_FILE).is_file() and (ok_dir / MODEL_DIR / "task.json").is_file()
    assert JobResult.load(ok_dir) == ok
    assert set(ok.scores) == {*SCORE_METRICS["binary"], RESULT}
    assert ok.scores[RESULT] == ok.scores["auc"]
    assert set(ok.costs) <= set(COST_METRICS)
    for name in ("fit_s", "predict_s", "latency_p50_ms", "latency_p99_ms", "throughput_rows_s",
                 "model_size_mb", "models_count", "duration_s", "overhead_s", "peak_rss_mb", "cpu_s"):
        assert name in ok.costs, name
    # The timeline: every stage in order, from the worker's launch to the scored result.
    timeline = ok.info["timeline_s"]
    stages = ["worker started", "loading data", "starting the framework", "fitting", "predicting",
              "saving", "measuring latency", "done", "worker exited", "scored"]
    assert [timeline[stage] for stage in stages] == sorted(timeline[stage] for stage in stages)
    assert 0 <= timeline["scored"] <= ok.costs["duration_s"] + 0.001  # the timeline is rounded to ms
    # The watchdog's samples, saved as a small time series with the stage each fell in.
    samples = pd.read_csv(ok_dir / SERIES_FILE)
    assert list(samples.columns) == [SERIES_TIME, SERIES_STAGE, "rss_mb", "cpu_pct"]  # no GPU here
    assert len(samples) >= 1 and samples[SERIES_TIME].is_monotonic_increasing
    assert set(samples[SERIES_STAGE]) <= {"launching", *stages}
    assert samples["rss_mb"].max() <= ok.costs["peak_rss_mb"] + 1e-6
    assert ok.costs["latency_p99_ms"] >= ok.costs["latency_p50_ms"] > 0
    assert not any(name.startswith("gpu_") for name in ok.costs)  # no GPU here: no fake zeros
    for failed in (timeout, memory, abort, raised):
        assert failed.scores == {} and (tmp_path / "runs").is_dir()


def _gone(pid: int) -> bool:
    return not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize(("variant", "status"), [("spawn", "timeout"), ("orphan", "failed")])
def test_no_process_the_job_started_outlives_it(
    variant: str, status: str, project: dict[str, DatasetSpec], tmp_path: Path
) -> None:
    # spawn: killed at the hard limit with its helper; orphan: the worker crashed and left a
    # helper in a session of its own (as H2O's JVM is), which the watchdog still finds.
    job_dir = tmp_path / "runs" / variant
    result = run_job(_job(variant), project["binary"], job_dir, grace_seconds=GRACE_S)
    assert result.status == status
    helper_pid = int((job_dir / misbehaving_adapter.GRANDCHILD_PID_FILE).read_text())
    deadline = time.monotonic() + 5
    while not _gone(helper_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(helper_pid)


def test_child_runs_pinned_with_thread_limits(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    job_dir = tmp_path / "runs" / "pinned"
    result = run_job(_job("ok"), project["binary"], job_dir, cpu_cores=[0], grace_seconds=GRACE_S)
    assert result.status == "ok"
    payload = json.loads((job_dir / "job.json").read_text())
    assert payload["cpus"] == [0] and payload["gpus"] == []
    assert payload["hard_limit_s"] == BUDGET.time_s + GRACE_S
    # As the child saw itself: pinned to core 0, one thread per pool, no GPU visible.
    assert result.info["affinity"] == [0]
    assert result.info["environment"] == {
        "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",
    }
    # The BLAS/OpenMP pools already loaded (in a forked worker, loaded before the variables were
    # set) run one thread each too.
    assert result.info["thread_pools"] and {p["threads"] for p in result.info["thread_pools"]} == {1}


def test_a_two_core_budget_gets_two_threads_per_pool(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this host has one core")
    two_cores = BUDGET.model_copy(update={"cores": 2, "name": "two-cores"})
    result = run_job(_job("ok", two_cores), project["binary"], tmp_path / "runs" / "two",
                     cpu_cores=[0, 1], grace_seconds=GRACE_S)
    assert result.status == "ok" and result.info["affinity"] == [0, 1]
    assert result.info["environment"]["OMP_NUM_THREADS"] == "2"
    assert {p["threads"] for p in result.info["thread_pools"]} == {2}


def test_gpu_job_without_a_gpu_is_skipped(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    if gpu_inventory().available:
        pytest.skip("this host has an NVIDIA GPU")
    gpu_budget = BUDGET.model_copy(update={"gpus": 1, "name": "with-gpu"})
    result = run_job(_job("ok", gpu_budget), project["binary"], tmp_path / "runs" / "gpu")
    assert result.status == "skipped"
    assert NO_GPU in result.error and "with-gpu" in result.error
    assert result.gpu["available"] is False and NO_GPU in result.gpu["reason"]
    assert result.host["gpu_model"] == "none"
    assert (tmp_path / "runs" / "gpu" / RESULT_FILE).is_file()


def test_a_model_that_predicts_nothing_fails_the_job_with_one_sentence(
    project: dict[str, DatasetSpec], tmp_path: Path
) -> None:
    # Nothing here runs long: the usual grace, so a loaded machine does not make it a timeout.
    result = run_job(_job("empty"), project["binary"], tmp_path / "runs" / "empty")

    assert result.status == "failed" and result.scores == {}, result.error
    assert result.error == ("misbehave's model predicted an array of shape () for 30 test rows; it most "
                            "likely trained no model, so raise the budget's time or set `_max_train_rows`")


def test_unknown_variant_and_unknown_framework_fail_with_one_sentence(
    project: dict[str, DatasetSpec], tmp_path: Path
) -> None:
    bad_variant = run_job(_job("dance"), project["binary"], tmp_path / "runs" / "variant")
    assert bad_variant.status == "failed" and "no variant 'dance'" in bad_variant.error
    unknown = run_job(_job("ok", framework="nope"), project["binary"], tmp_path / "runs" / "unknown")
    assert unknown.status == "failed" and "unknown framework 'nope'" in unknown.error


def test_a_workers_peak_rss_is_its_own_not_the_process_that_started_it() -> None:
    """Linux carries the spawning process's peak RSS across exec into getrusage's ru_maxrss; a cold
    worker started by a team worker (Prefect and MLflow loaded) reported ~130 MB it never used."""
    import subprocess
    import sys

    ballast = bytearray(b"\x01") * (600 * 2**20)  # the starting process's memory, touched
    probe = ("import resource; from tasks.worker import _own_peak_rss_kib; "
             "print(_own_peak_rss_kib() / 1024, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    del ballast
    own_mb, carried_mb = (float(value) for value in done.stdout.split())
    assert carried_mb > 600  # what ru_maxrss says: the parent's 600 MB
    assert own_mb < 400, own_mb  # what the worker records: its own imports only
