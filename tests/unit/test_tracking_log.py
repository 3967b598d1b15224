"""The MLflow record: experiment per suite, parent run per execution, one child run per job key."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
from run_support.job_folders import finished_job_folder, make_job, write_job_folder

from tasks.anytime import ANYTIME_FILE
from tasks.plan import Job
from tasks.results import PREDICTIONS_FILE, JobResult
from tasks.tracking import read, store
from tasks.tracking.execution import (
    Execution,
    execution_selection,
    finish_execution,
    latest_execution,
    log_alignment_reports,
    mark_unfinished,
    open_execution,
    start_execution,
)
from tasks.tracking.job_folder import mark_result_final, pending_job_dirs, waiting_reason, write_pending
from tasks.tracking.job_run import PYFUNC_NAME, LoggedJob, log_job_dir, sync_pending
from tasks.tracking.recorded import (
    RecordedJob,
    finished_job_keys,
    recorded_jobs,
    recorded_results,
    retryable_job_keys,
)
from tasks.vocabulary import (
    ALIGNMENT_METRICS,
    COST_METRICS,
    EXECUTION_TAGS,
    JOB_PARAMS,
    JOB_TAGS,
    SCALING_JOB_TAGS,
    SCORE_METRICS,
)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root of its own, so the embedded store lives in tmp_path."""
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


def log(execution: Execution, job: Job, job_dir: Path) -> LoggedJob:
    return log_job_dir(finished_job_folder(job_dir, execution, job))


def test_embedded_store_is_under_the_project_root(home: Path) -> None:
    assert store.tracking_uri() == f"sqlite:///{home / 'mlflow' / 'mlflow.db'}"
    assert "site-packages" in mlflow.__file__  # the project's mlflow/ folder never shadows the library


def test_tracking_uri_from_environment_wins(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert store.tracking_uri() == "http://127.0.0.1:5999"
    assert store.artifact_location("unit") is None


def test_job_run_has_the_vocabulary_and_its_pyfunc_reproduces_predictions(home: Path) -> None:
    execution = start_execution("unit", team="ml", selection={"folds": 1}, budget="test")
    job = make_job()
    job_dir = home / "runs" / job.key
    logged = log(execution, job, job_dir)

    run = store.client().get_run(logged.run_id)
    assert run.data.tags["mlflow.parentRunId"] == execution.execution_id
    # error, anytime_reason and energy_reason: only when there is one
    optional = {"error", "anytime_reason", "energy_reason"} | SCALING_JOB_TAGS
    assert set(JOB_TAGS) - optional <= set(run.data.tags)
    assert run.data.tags["status"] == "ok" and run.data.tags["team"] == "ml"
    assert set(run.data.metrics) == set(SCORE_METRICS["binary"]) | {"result", "fit_s", "predict_s",
                                                                    "peak_rss_mb", "models_count"}
    assert set(run.data.metrics) <= set(SCORE_METRICS["binary"]) | {"result"} | set(COST_METRICS)
    assert {"fold", "seed", "budget_time_s", "param._note", "param.depth"} <= set(run.data.params)
    assert all(name in JOB_PARAMS or name.startswith("param.") for name in run.data.params)
    artifacts = {item.path for item in store.client().list_artifacts(logged.run_id)}
    assert PREDICTIONS_FILE in artifacts

    mlflow.set_tracking_uri(store.tracking_uri())  # the record sets nothing global for a reader
    model = mlflow.pyfunc.load_model(f"runs:/{logged.run_id}/{PYFUNC_NAME}")
    X = pd.DataFrame({"a": np.arange(12.0)})
    recorded = pd.read_csv(job_dir / PREDICTIONS_FILE)
    reloaded = model.predict(X)
    assert list(reloaded.columns) == ["prediction", "proba_no", "proba_yes"]
    assert reloaded["prediction"].astype(str).tolist() == recorded["prediction"].astype(str).tolist()
    np.testing.assert_allclose(reloaded[["proba_no", "proba_yes"]], recorded[["proba_no", "proba_yes"]])

    written = JobResult.load(job_dir)
    [(key, read_back)] = recorded_results(execution.execution_id).items()
    assert key == job.key and read_back.status == "ok"
    assert read_back.scores == written.scores and read_back.costs == written.costs

    parent = store.client().get_run(execution.execution_id)
    assert set(parent.data.tags) >= set(EXECUTION_TAGS) - {"data_gate_failures", "data_gate_accepted",
                                                           "best.DATASET", "attribution_main_factor",
                                                           "attribution_of", "attribution_mix",
                                                           "attribution_install_s", "attribution_code"}
    assert parent.data.tags["trigger"] == "cli"  # nightly and manual deployments say so
    nightly = start_execution("unit", trigger="nightly")
    assert store.client().get_run(nightly.execution_id).data.tags["trigger"] == "nightly"
    assert execution_selection(execution.execution_id) == {"folds": 1}


def test_a_finished_job_key_is_recorded_once(home: Path) -> None:
    execution = start_execution("unit")
    job = make_job()
    first = log(execution, job, home / "runs" / "a")
    again = log(execution, job, home / "runs" / "b")
    assert again.already_recorded and again.run_id == first.run_id
    assert list(recorded_jobs(execution.execution_id)) == [job.key]


def test_a_failed_record_is_replaced_not_duplicated(home: Path) -> None:
    execution = start_execution("unit")
    job = make_job()
    job_dir = finished_job_folder(home / "runs" / job.key, execution, job, status="failed")
    failed = log_job_dir(job_dir)
    assert retryable_job_keys(execution.execution_id) == {job.key}
    assert store.client().get_run(failed.run_id).data.tags["error"] == "RuntimeError: boom"

    retried = log(execution, job, job_dir)
    recorded = recorded_jobs(execution.execution_id)
    assert recorded == {job.key: RecordedJob(retried.run_id, "ok")}
    assert store.client().get_run(failed.run_id).info.lifecycle_stage == "deleted"


def test_unlogged_job_folders_are_synced_later(home: Path) -> None:
    execution = start_execution("unit")
    jobs = [make_job(fold) for fold in range(2)]
    for job in jobs:
        finished_job_folder(home / "runs" / "unit" / job.key, execution, job)
    still_running = home / "runs" / "unit" / "still-running"
    write_pending(still_running, execution, make_job(5), problem_type="binary", metric="auc")
    cut_short = home / "runs" / "unit" / "cut-short"  # the worker's own result, never scored
    write_pending(cut_short, execution, make_job(6), problem_type="binary", metric="auc")
    write_job_folder(cut_short, make_job(6))

    assert len(pending_job_dirs()) == 2  # only finished, final results are pending
    synced = sync_pending()
    assert len(synced) == 2
    assert pending_job_dirs() == []
    assert set(finished_job_keys(execution.execution_id)) == {job.key for job in jobs}


def test_latest_unfinished_execution(home: Path) -> None:
    assert latest_execution("unit") is None
    first = start_execution("unit")
    finish_execution(first, summary_markdown="# done\n", data_gate_failures={"toy": "bad rows"})
    assert latest_execution("unit", unfinished_only=True) is None
    assert latest_execution("unit") == first.execution_id
    second = start_execution("unit")
    mark_unfinished(second)
    assert latest_execution("unit", unfinished_only=True) == second.execution_id
    reopened = open_execution(second.execution_id)
    assert reopened.execution_id == second.execution_id
    tags = store.client().get_run(first.execution_id).data.tags
    assert tags["execution_state"] == "finished" and tags["data_gate_failures"] == "toy: bad rows"


def test_an_unreachable_tracking_server_loses_nothing(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.cli_sync import sync_command

    for name in store.HTTP_SETTINGS:  # MLflow's defaults as a user has them: the harness bounds them
        monkeypatch.delenv(name, raising=False)
    execution = start_execution("unit")
    job = make_job()
    job_dir = finished_job_folder(home / "runs" / "unit" / job.key, execution, job)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(Exception):  # noqa: B017 - whatever the HTTP client raises
        log_job_dir(job_dir)
    assert pending_job_dirs() == [job_dir]  # the result waits on disk

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the store is back
    sync_command()
    assert pending_job_dirs() == []
    assert set(recorded_jobs(execution.execution_id)) == {job.key}


def test_the_breaker_sends_results_to_disk_at_once_then_logs_them_in_order(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import time

    from tasks.tracking.breaker import ExecutionBreaker

    for name in store.HTTP_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    execution = start_execution("unit")
    folders = [finished_job_folder(home / "runs" / "unit" / f"job{fold}", execution, make_job(fold=fold))
               for fold in range(3)]
    breaker = ExecutionBreaker(execution.execution_id, execution.experiment_id, probe_every_s=0.2)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:9")  # the server went away
    assert breaker.record(folders[0]) is None  # waits out the bounded retries once, then opens
    assert breaker.is_open and "unreachable" in breaker.reason
    started = time.perf_counter()
    assert breaker.record(folders[1]) is None and breaker.record(folders[2]) is None
    assert time.perf_counter() - started < 1  # later results go straight to disk
    assert pending_job_dirs() == folders
    assert all("unreachable" in waiting_reason(folder) for folder in folders)

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # the store answers again: the probe drains
    deadline = time.monotonic() + 60
    while breaker.is_open and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not breaker.is_open and breaker.settle().count == 0
    assert pending_job_dirs() == []
    runs = store.client().search_runs([execution.experiment_id], "tags.job_key LIKE '%'",
                                      order_by=["attributes.start_time ASC"])
    assert [run.data.tags["fold"] for run in runs] == ["0", "1", "2"]  # in the order the jobs finished


def test_multimodal_job_runs_carry_alignment_figures_and_the_parent_its_report(
    data_home, built_catalog: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tasks.align import alignment_metrics

    home = data_home("basic_motions")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    shutil.copy(built_catalog / "basic_motions.alignment.json", home / "datasets")
    execution = start_execution("unit")
    job = dataclasses.replace(make_job(), dataset="basic_motions[acc]")
    run = store.client().get_run(log(execution, job, home / "runs" / job.key).run_id)
    figures = alignment_metrics("basic_motions[acc]")
    assert figures and {name: run.data.metrics[name] for name in figures} == pytest.approx(figures)
    # Every figure is documented: per-stream names as align_STREAM_*.
    documented = {re.sub(r"^align_(acc|gyro)_", "align_STREAM_", name) for name in figures}
    assert documented <= set(ALIGNMENT_METRICS)

    toy = store.client().get_run(log(execution, make_job(fold=1), home / "runs" / "toy").run_id)
    assert not any(name.startswith("align_") for name in toy.data.metrics)  # a card-less dataset

    datasets = ["basic_motions[acc]", "basic_motions[gyro]", "toy"]
    assert log_alignment_reports(execution, datasets) == ["datasets/basic_motions.alignment.json"]
    artifacts = {item.path for item in store.client().list_artifacts(execution.execution_id, "datasets")}
    assert artifacts == {"datasets/basic_motions.alignment.json"}


def test_a_jobs_series_are_logged_as_artifacts_and_step_metrics_and_read_back(home: Path) -> None:
    from tasks.resources import SERIES_FILE
    from tasks.results import TRAINING_CURVE_FILE
    from tasks.tracking import read

    execution = start_execution("unit")
    job = make_job()
    job_dir = home / "runs" / job.key
    finished_job_folder(job_dir, execution, job)
    elapsed = np.arange(300) * 0.25
    samples = pd.DataFrame({"elapsed_s": elapsed, "stage": ["fitting"] * 300, "rss_mb": 100 + elapsed,
                            "cpu_pct": 95.0})
    samples.to_csv(job_dir / SERIES_FILE, index=False)
    curve = pd.DataFrame({"step": [10, 20, 30], "elapsed_s": [1.0, 2.0, 3.0],
                          "validation_loss": [0.9, 0.7, 0.6]})
    curve.to_csv(job_dir / TRAINING_CURVE_FILE, index=False)
    logged = log_job_dir(job_dir)

    client = store.client()
    artifacts = {item.path for item in client.list_artifacts(logged.run_id)}
    assert {SERIES_FILE, TRAINING_CURVE_FILE} <= artifacts
    rss = client.get_metric_history(logged.run_id, "series_rss_mb")
    assert 50 <= len(rss) <= 100  # a few points for MLflow's chart; the whole series is the artifact
    assert [m.step for m in rss] == sorted(m.step for m in rss) and rss[-1].step <= 1000 * elapsed[-1]
    assert [m.value for m in client.get_metric_history(logged.run_id, "validation_loss")] == [0.9, 0.7, 0.6]
    [(run_id, series)] = read.job_series([logged.run_id]).items()
    assert run_id == logged.run_id
    pd.testing.assert_frame_equal(series[SERIES_FILE], samples)
    assert series[TRAINING_CURVE_FILE]["validation_loss"].tolist() == [0.9, 0.7, 0.6]


def test_a_job_s_anytime_curve_reaches_the_report_and_a_job_without_one_says_why(home: Path) -> None:
    """anytime.csv is an artifact the report reads back (read.anytime_curves); a job whose model
    exposes no search record carries the reason as the anytime_reason tag."""
    execution = start_execution("unit", team="ml", selection={"folds": 2}, budget="test")
    reason = "the framework exposes no record of its search's progress"
    for fold, anytime in ((0, {"offered": True, "candidates": 2}), (1, {"offered": False, "reason": reason})):
        job = make_job(fold)
        job_dir = home / "runs" / job.key
        write_pending(job_dir, execution, job, problem_type="binary", metric="auc")
        result = write_job_folder(job_dir, job)
        result.info["anytime"] = anytime
        if anytime["offered"]:
            result.costs.update(anytime_points=2.0, anytime_t95_s=0.004, anytime_t99_s=0.004)
            pd.DataFrame({"elapsed_s": [0.004, 0.01], "model": ["m", "m"], "result": [0.5, 0.5],
                          "validation": [0.1, 0.1], "source": ["s", "s"]}).to_csv(job_dir / ANYTIME_FILE,
                                                                                index=False)
        result.save(job_dir)
        mark_result_final(job_dir)
        log_job_dir(job_dir)

    runs = read.job_runs(execution_id=execution.execution_id)
    by_fold = {int(row["fold"]): row for row in runs.to_dict("records")}
    assert by_fold[1]["anytime_reason"] == reason and by_fold[0]["anytime_reason"] == ""
    curves = read.anytime_curves(runs)
    assert list(curves["fold"].astype(int)) == [0, 0] and list(curves["elapsed_s"]) == [0.004, 0.01]
    assert set(curves["framework"]) == {"constant"}
