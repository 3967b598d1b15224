"""The serving evaluation's canary with real servers on 127.0.0.1: the constant model (primary) and
hgb (the second version) each behind MLflow's scoring server, the canary's router in front of both,
a short closed loop of bounded requests through the router's one address. Assertions are about
behaviour (the split, both versions' figures, their agreement), never about how fast it is."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from jobs_support.tiny_project import make_project
from pydantic import ValidationError

from tasks.evaluations._canary import CanaryNotFound, canary_context
from tasks.evaluations._scoring_server import is_listening
from tasks.evaluations.base import EvaluationContext
from tasks.evaluations.serving import ServingSettings, serve_canary
from tasks.evaluations.stacks import all_stacks
from tasks.evaluations.stage import run_evaluations
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import Budget, DatasetSpec

BUDGET = Budget(name="canary-test", time_s=5, cores=1, memory_mb=3000)
SHARE = 0.3
pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return make_project(tmp_path / "project", rows=120)


def _job(spec: DatasetSpec, tmp_path: Path, framework: str) -> tuple[Job, Path, JobResult]:
    job = Job("canary", spec.name, "v0", framework, None, 0, 0, BUDGET, {})
    job_dir = tmp_path / "runs" / "canary" / job.key
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    return job, job_dir, result


def _serve(job: Job, spec: DatasetSpec, job_dir: Path, result: JobResult,
           canary: dict[str, Any]) -> dict[str, Any]:
    block = {"enabled": True, "startup_timeout_s": 90, "time_s": 200, "concurrency": [2], "duration_s": 1.5,
             "max_requests": 100, "search_steps": 0, "canary": canary}
    return run_evaluations(job, spec, job_dir, result, {"serving": block}).evaluations["serving"]


def test_the_canary_gets_its_share_and_both_versions_are_measured(project: dict[str, DatasetSpec],
                                                                  tmp_path: Path) -> None:
    spec = project["binary"]
    _job(spec, tmp_path, "hgb")  # the second version: a job of the same suite, dataset and fold
    job, job_dir, _ = _job(spec, tmp_path, "constant")
    folder = job_dir / "evaluations" / "serving"
    settings = ServingSettings(enabled=True, concurrency=[2], duration_s=1.5, max_requests=100,
                               search_steps=0, startup_timeout_s=90, time_s=200,
                               canary={"share": SHARE, "model": "hgb"})
    assert settings.canary is not None
    context = EvaluationContext(job=job, spec=spec, job_dir=job_dir, folder=folder, settings=settings,
                                cores=[])
    outcome = serve_canary(context, settings, settings.canary, all_stacks()["mlflow"], folder / "canary",
                           [], [])
    assert outcome.status == "ok", outcome.reason
    metrics = outcome.metrics
    routed = metrics["serve_canary_requests"] + metrics["serve_canary_primary_requests"]
    assert routed >= 40  # warm-up and the closed-loop step, all through the one address
    assert abs(metrics["serve_canary_share_routed"] - SHARE) < 0.15
    for prefix in ("serve_canary", "serve_canary_primary"):
        assert 0 < metrics[f"{prefix}_p50_ms"] <= metrics[f"{prefix}_p99_ms"]
        assert metrics[f"{prefix}_error_rate"] == 0
    # The constant model predicts one class; hgb tells some rows apart.
    assert 0 < metrics["serve_canary_agreement"] < 1
    assert outcome.info["agreement_rows"] > 0 and outcome.info["job"] == "tiny_binary/hgb/fold0/seed0"
    assert not is_listening(outcome.info["router_port"])  # the router was stopped


def test_a_canary_model_that_is_not_there_is_named_with_what_to_do(project: dict[str, DatasetSpec],
                                                                   tmp_path: Path) -> None:
    spec = project["binary"]
    job, job_dir, result = _job(spec, tmp_path, "constant")
    outcome = _serve(job, spec, job_dir, result, {"share": SHARE, "model": "rf"})
    assert outcome["status"] == "partial" and outcome["tags"]["serving_canary"] == "failed"
    assert outcome["tags"]["serving_canary.reason"].startswith(
        "serving.canary.model rf names no saved model: its job (tiny_binary/rf/fold0/seed0) has no finished "
        "folder at ")
    assert "run that job in this suite first, or give the path of a finished job folder" in outcome["reason"]
    # The primary's own figures stand.
    assert "serve_c2_p99_ms" in outcome["metrics"]


@pytest.mark.parametrize("share", [0, 1, 1.5, -0.1])
def test_a_share_outside_zero_and_one_is_refused_naming_the_field(share: float) -> None:
    with pytest.raises(ValidationError, match=r"serving\.canary\.share .* is not a share of the requests; "
                                              r"give a number between 0 and 1"):
        ServingSettings(enabled=True, canary={"share": share, "model": "hgb"})


def test_a_canary_folder_without_a_saved_model_is_named_with_what_to_do(project: dict[str, DatasetSpec],
                                                                         tmp_path: Path) -> None:
    spec = project["binary"]
    job = Job("canary", spec.name, "v0", "constant", None, 0, 0, BUDGET, {})
    settings = ServingSettings(enabled=True)
    context = EvaluationContext(job=job, spec=spec, job_dir=tmp_path / "runs" / job.key, folder=tmp_path,
                                settings=settings, cores=[])
    empty = tmp_path / "kept" / "job"
    empty.mkdir(parents=True)
    expected = (rf"^serving\.canary\.model {empty} is no job folder with a saved model \(.*framework\.json "
                r"is missing\); give the folder of a finished job, or a framework id such as hgb@1\.5\.2")
    with pytest.raises(CanaryNotFound, match=expected):
        canary_context(context, str(empty), tmp_path / "canary")
