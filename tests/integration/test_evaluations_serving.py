"""The serving evaluation with real servers: MLflow's scoring server on 127.0.0.1 and a real Locust,
on tiny models, short steps and bounded request counts. Assertions are about behaviour (counts,
ordering, bounds a server physically cannot exceed), never about how fast this machine is."""

from __future__ import annotations

import csv
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from jobs_support import serving_adapter
from jobs_support.tiny_project import REPO_ROOT, make_project

from tasks.evaluations._pyfunc import HARNESS_ARCHIVE
from tasks.evaluations._scoring_server import is_listening
from tasks.evaluations.stage import evaluation_folder, run_evaluations
from tasks.frameworks.registry import EXTRA_ADAPTERS_ENV
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import PREDICTIONS_FILE, JobResult
from tasks.specs import Budget, DatasetSpec

BUDGET = Budget(name="serving-test", time_s=5, cores=1, memory_mb=3000)
pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    monkeypatch.setenv(EXTRA_ADAPTERS_ENV, serving_adapter.__file__)
    return make_project(tmp_path / "project", rows=80)


def _job(project: dict[str, DatasetSpec], tmp_path: Path, framework: str = "constant",
         variant: str | None = None) -> tuple[Job, DatasetSpec, Path, JobResult]:
    spec = project["binary"]
    job = Job("serving", spec.name, "v0", framework, variant, 0, 0, BUDGET, {})
    job_dir = tmp_path / "runs" / job.key
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    return job, spec, job_dir, result


def _serve(job: Job, spec: DatasetSpec, job_dir: Path, result: JobResult, **settings: Any) -> dict[str, Any]:
    block = {"enabled": True, "startup_timeout_s": 90, "time_s": 200, **settings}
    evaluated = run_evaluations(job, spec, job_dir, result, {"serving": block})
    assert evaluated.status == "ok"  # whatever serving met, the job's own outcome stands
    return evaluated.evaluations["serving"]


def _details(job_dir: Path) -> dict[str, Any]:
    return json.loads((evaluation_folder(job_dir, "serving") / "result.json").read_text())


def _poison_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `tasks` package that breaks on import, on everyone's path after the checkout: the scoring
    server (which runs without the checkout) can then only load the model through its own copy of
    the harness (code_paths)."""
    poison = tmp_path / "poison" / "tasks"
    poison.mkdir(parents=True)
    (poison / "__init__.py").write_text("raise ImportError('the checkout was imported')\n")
    monkeypatch.setenv("PYTHONPATH", str(poison.parent))


def test_closed_loop_ladder_on_a_self_contained_model(project: dict[str, DatasetSpec], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _poison_the_checkout(tmp_path, monkeypatch)
    job, spec, job_dir, result = _job(project, tmp_path)
    limit = 120
    outcome = _serve(job, spec, job_dir, result, concurrency=[4, 1, 2], duration_s=1.5, max_requests=limit,
                     search_steps=0)
    assert outcome["status"] == "ok", outcome["reason"]
    metrics, details = outcome["metrics"], _details(job_dir)
    assert metrics["serve_startup_s"] > 0
    steps = details["info"]["steps"]
    assert [step["name"] for step in steps] == ["c1", "c2", "c4"]  # the ladder goes up
    for step in steps:
        users = step["users"]
        assert 0 < step["requests"] <= limit + users  # bounded (users still in flight may land)
        assert step["failures"] == 0 and metrics[f"serve_c{users}_error_rate"] == 0
        assert 0 < step["p50_ms"] <= step["p95_ms"] <= step["p99_ms"] <= step["max_ms"]
        assert metrics[f"serve_c{users}_p99_ms"] == pytest.approx(step["p99_ms"])
        assert metrics[f"serve_c{users}_rps"] > 0
    assert "serve_max_qps_at_slo" not in metrics  # no search was asked for
    # Parity first: the server answered the whole test fold as the model does in process.
    assert 0 <= details["info"]["parity_max_abs"] <= details["info"]["parity_tolerance"] == 1e-5
    assert details["tags"] == {"serving_stack.mlflow": "ok"}

    folder = evaluation_folder(job_dir, "serving")
    with open(folder / "history.csv") as handle:
        history = list(csv.DictReader(handle))
    for name in ("c1", "c2", "c4"):
        counts = [int(row["requests"]) for row in history if row["step"] == name]
        assert counts and counts == sorted(counts)  # request counts only grow within a step
    with open(folder / "locust" / "c4_stats.csv") as handle:
        rows = {row["Name"]: row for row in csv.DictReader(handle)}
    assert int(rows["c4"]["Request Count"]) >= steps[-1]["requests"] - 4  # Locust's own count of the step
    assert "locust/c4_stats.csv" in outcome["files"] and "server.log" in outcome["files"]
    assert "warm-up" not in {step["name"] for step in steps}  # warm-up is never counted
    assert not is_listening(details["info"]["port"])  # the server was stopped

    # The served model is self-contained, outside the checkout, and answers as the job predicted.
    model = folder / "pyfunc"
    # The harness travels as one archive (one upload through an artifact proxy, not one per module).
    assert [path.name for path in (model / "code").iterdir()] == [HARNESS_ARCHIVE]
    with zipfile.ZipFile(model / "code" / HARNESS_ARCHIVE) as archive:
        names = set(archive.namelist())
    assert "tasks/evaluations/_pyfunc.py" in names and not any("__pycache__" in name for name in names)
    assert not model.resolve().is_relative_to(REPO_ROOT)
    requirements = (model / "requirements.txt").read_text()
    assert "mlflow==" in requirements and "scikit-learn==" in requirements
    with open(job_dir / PREDICTIONS_FILE) as handle:
        expected = next(csv.DictReader(handle))
    answer = json.loads(details["info"]["first_answer"])["predictions"][0]
    assert answer["prediction"] == expected["prediction"]
    assert answer["proba_yes"] == pytest.approx(float(expected["proba_yes"]))
    assert "the checkout was imported" not in (folder / "server.log").read_text()


def test_open_loop_search_finds_the_capacity_of_a_known_server(project: dict[str, DatasetSpec],
                                                                tmp_path: Path) -> None:
    # One worker, one request at a time, SLEEP_MS each: the server cannot hold more than this.
    capacity = 1000 / serving_adapter.SLEEP_MS
    job, spec, job_dir, result = _job(project, tmp_path, "sleepy", "sleep")
    outcome = _serve(job, spec, job_dir, result, concurrency=[1, 4], duration_s=2.5, max_requests=2000,
                     slo_ms=400, search_steps=5, open_loop="locust")
    assert outcome["status"] == "ok", outcome["reason"]
    found = outcome["metrics"]["serve_max_qps_at_slo"]
    assert found <= capacity, f"the search returned {found:.1f} req/s, more than the server can hold"
    assert found >= 0.3 * capacity
    details = _details(job_dir)
    open_steps = [step for step in details["info"]["steps"] if step["mode"] == "open"]
    assert len(open_steps) == 5
    for step in open_steps:
        assert step["within_slo"] == (step["failures"] == 0 and step["p99_ms"] <= 400)
        # The server's own CPU and peak RSS in each open step too, beside LoadGen's (bench_serving).
        assert step["server_cpu_percent"] >= 0 and step["server_peak_rss_mb"] > 0
        if step["target_rate"] > found:
            assert not step["within_slo"]  # the answer is the highest rate held
    assert any(step["target_rate"] == pytest.approx(found) and step["within_slo"] for step in open_steps)
    c4 = next(step for step in details["info"]["steps"] if step["name"] == "c4")
    assert c4["rps"] <= capacity * 1.1  # closed loop: the lock is the bottleneck, whatever the users


def test_a_model_that_cannot_load_is_failed_with_the_reason(project: dict[str, DatasetSpec],
                                                             tmp_path: Path) -> None:
    job, spec, job_dir, result = _job(project, tmp_path, "sleepy", "unloadable")
    outcome = _serve(job, spec, job_dir, result, concurrency=[1], duration_s=1, search_steps=0)
    assert outcome["status"] == "failed"
    assert "before it answered /ping (the model did not load)" in outcome["reason"]
    assert serving_adapter.LOAD_ERROR in outcome["reason"]  # the server log's tail says why
    assert JobResult.load(job_dir).status == "ok"
