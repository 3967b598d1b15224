"""The post-job stage: a suite's evaluation blocks are validated, run on the saved model in a process
of their own, recorded beside the job, and never change the job's own outcome."""

from __future__ import annotations

from pathlib import Path

import pytest
from jobs_support import probe_evaluation
from jobs_support.tiny_project import make_project

from tasks.errors import UserError
from tasks.evaluations.registry import EXTRA_EVALUATIONS_ENV, all_evaluations, get_evaluation
from tasks.evaluations.stage import evaluation_folder, run_evaluations
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import JobResult
from tasks.specs import Budget, DatasetSpec, load_suite
from tasks.tracking.docs import vocabulary_markdown
from tasks.vocabulary import name_pattern

BUDGET = Budget(name="stage", time_s=5, cores=1, memory_mb=2000)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, DatasetSpec]:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    monkeypatch.setenv(EXTRA_EVALUATIONS_ENV, probe_evaluation.__file__)
    return make_project(tmp_path / "project", rows=80)


def _suite(root: Path, body: str) -> Path:
    path = root / "specs" / "suites" / "s.yaml"
    path.write_text("datasets: [tiny_binary]\nframeworks: [constant]\nbudget: smoke\n" + body)
    return path


def test_suite_blocks_are_each_evaluations_settings(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    root = tmp_path / "project"
    suite = load_suite(_suite(root, "probe: {enabled: true, mode: raise, time_s: 7}\n"), all_evaluations())
    assert suite.evaluation_blocks() == {"probe": {"enabled": True, "time_s": 7, "mode": "raise"}}
    assert load_suite(_suite(root, "probe: {enabled: false}\n"), all_evaluations()).evaluation_blocks() == {}


@pytest.mark.parametrize(("body", "message"), [
    ("probe: {enabled: true, speed: 3}\n", r"s\.yaml: unknown field 'probe\.speed'"),
    ("probe: {mode: fast}\n", r"s\.yaml: field 'probe\.mode'"),
    ("probe: {time_s: 0}\n", r"s\.yaml: field 'probe\.time_s'"),
    ("probe: yes\n", r"s\.yaml: field 'probe' must be a mapping"),
    ("servng: {enabled: true}\n", r"s\.yaml: unknown field 'servng'"),
])
def test_bad_blocks_are_one_sentence(project: dict[str, DatasetSpec], tmp_path: Path, body: str,
                                     message: str) -> None:
    with pytest.raises(UserError, match=message):
        load_suite(_suite(tmp_path / "project", body), all_evaluations())


def _finished_job(project: dict[str, DatasetSpec], tmp_path: Path, problem_type: str = "binary") -> tuple[
        Job, DatasetSpec, Path, JobResult]:
    spec = project[problem_type]
    job = Job("stage", spec.name, "v0", "constant", None, 0, 0, BUDGET, {})
    job_dir = tmp_path / "runs" / job.key
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    return job, spec, job_dir, result


def test_an_evaluation_scores_the_saved_model_in_its_own_process(project: dict[str, DatasetSpec],
                                                                 tmp_path: Path) -> None:
    job, spec, job_dir, result = _finished_job(project, tmp_path)
    evaluated = run_evaluations(job, spec, job_dir, result, {"probe": {"enabled": True, "time_s": 60}})
    outcome = evaluated.evaluations["probe"]
    assert outcome["status"] == "ok", outcome["reason"]
    # The harness's scoring of the same model on the same fold gives the job's own result.
    assert outcome["metrics"]["probe_result"] == pytest.approx(result.scores["result"])
    assert outcome["wall_s"] > 0
    folder = evaluation_folder(job_dir, "probe")
    assert (folder / "rows.txt").read_text().strip() == str(int(result.costs["test_rows"]))
    assert JobResult.load(job_dir).evaluations["probe"]["status"] == "ok"  # saved with the job


@pytest.mark.parametrize(("mode", "time_s", "status", "reason"), [
    # A generous limit for the one that raises: on a loaded machine the child's start alone takes seconds.
    ("raise", 120, "failed", "the probe was told to fail"),
    ("sleep", 1, "timeout", "killed at the evaluation's limit"),
])
def test_a_failing_evaluation_never_changes_the_job(project: dict[str, DatasetSpec], tmp_path: Path,
                                                    mode: str, time_s: int, status: str, reason: str) -> None:
    job, spec, job_dir, result = _finished_job(project, tmp_path)
    scores = dict(result.scores)
    evaluated = run_evaluations(job, spec, job_dir, result,
                                {"probe": {"enabled": True, "time_s": time_s, "mode": mode}})
    assert evaluated.status == "ok" and evaluated.scores == scores
    assert evaluated.evaluations["probe"]["status"] == status
    assert reason in evaluated.evaluations["probe"]["reason"]
    # The evaluation's own words for the failure are recorded, whether the child or the stage caught it.
    assert evaluated.evaluations["probe"]["tags"] == {"probe_outcome": f"stopped: {status}"}


def test_not_applicable_is_not_a_failure(project: dict[str, DatasetSpec], tmp_path: Path) -> None:
    job, spec, job_dir, result = _finished_job(project, tmp_path, "regression")
    evaluated = run_evaluations(job, spec, job_dir, result, {"probe": {"enabled": True}})
    assert evaluated.evaluations["probe"] == {
        "status": "not applicable", "reason": "the probe does not take regression", "metrics": {},
        "files": [], "wall_s": 0.0}
    failed = JobResult(job_key="x", status="failed", error="boom")
    outcome = run_evaluations(job, spec, tmp_path / "failed", failed, {"probe": {"enabled": True}})
    assert outcome.evaluations["probe"]["status"] == "not applicable"
    assert outcome.status == "failed"


def test_evaluation_names_reach_the_vocabulary(project: dict[str, DatasetSpec]) -> None:
    assert "`probe_result`" in vocabulary_markdown()
    (figure,) = probe_evaluation.ProbeEvaluation.figures
    assert get_evaluation("probe").metrics == {"probe_result": figure.meaning}
    import re

    assert re.match(name_pattern("serve_cN_p99_ms"), "serve_c16_p99_ms")
    assert not re.match(name_pattern("serve_cN_p99_ms"), "serve_c16_p95_ms")


def test_tracking_records_the_outcome_and_reads_it_back(project: dict[str, DatasetSpec], tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.tracking import store
    from tasks.tracking.execution import start_execution
    from tasks.tracking.job_folder import mark_result_final, write_pending
    from tasks.tracking.job_run import log_job_dir
    from tasks.tracking.recorded import recorded_results

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    job, spec, job_dir, result = _finished_job(project, tmp_path)
    run_evaluations(job, spec, job_dir, result, {"probe": {"enabled": True}})
    execution = start_execution("stage")
    write_pending(job_dir, execution, job, problem_type="binary", metric="auc")
    mark_result_final(job_dir)
    logged = log_job_dir(job_dir)

    run = store.client().get_run(logged.run_id)
    assert run.data.tags["evaluation.probe"] == "ok"
    assert run.data.metrics["probe_result"] == pytest.approx(result.scores["result"])
    assert run.data.metrics["eval_probe_s"] > 0
    artifacts = {item.path for item in store.client().list_artifacts(logged.run_id, "evaluations/probe")}
    assert artifacts == {"evaluations/probe/result.json", "evaluations/probe/rows.txt"}
    recorded = recorded_results(execution.execution_id)[job.key].evaluations["probe"]
    assert recorded["status"] == "ok" and set(recorded["metrics"]) == {"probe_result"}
