"""What the MLflow UI reads off the record: run names, the job's own times, the dataset input,
the model's signature, the experiment kind, and the execution's plain params and key numbers."""

from __future__ import annotations

import json
from pathlib import Path

import mlflow
import pytest
from run_support.job_folders import ENDED_UTC, STARTED_UTC, finished_job_folder, make_job

from tasks.plan import Job
from tasks.tracking import store
from tasks.tracking.execution import execution_selection, finish_execution, start_execution
from tasks.tracking.inputs import SOURCE_TYPE, dataset_input
from tasks.tracking.job_run import job_run_name, log_job_dir, unix_ms
from tasks.vocabulary import EXECUTION_METRICS


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv(store.UI_URL_ENV, raising=False)
    return tmp_path


def test_run_names_lead_with_the_framework() -> None:
    job = make_job(fold=1)
    assert job_run_name(job) == "constant · toy · f1 s0"
    variant = Job("unit", "breast_cancer", "v", "autogluon", "best", 0, 3, job.budget)
    assert job_run_name(variant) == "autogluon:best · breast_cancer · f0 s3"


def test_a_job_run_has_its_name_times_dataset_input_and_model_schema(home: Path) -> None:
    execution = start_execution("unit")
    job = make_job()
    logged = log_job_dir(finished_job_folder(home / "runs" / job.key, execution, job))
    run = store.client().get_run(logged.run_id)

    assert run.info.run_name == "constant · toy · f0 s0"
    assert run.info.start_time == unix_ms(STARTED_UTC)
    assert run.info.end_time == unix_ms(ENDED_UTC)
    assert run.info.end_time - run.info.start_time == 42_500  # MLflow's Duration is the job's

    [data_input] = run.inputs.dataset_inputs
    assert (data_input.dataset.name, data_input.dataset.digest) == ("toy", job.data_version)
    assert data_input.dataset.source_type == SOURCE_TYPE
    assert json.loads(data_input.dataset.source) == {"card": "specs/datasets/toy.yaml", "fold": 0}
    assert {tag.key: tag.value for tag in data_input.tags} == {"mlflow.data.context": "train"}

    # The model is an output of its run, with a schema and an example the UI shows.
    [output] = run.outputs.model_outputs
    mlflow.set_tracking_uri(store.tracking_uri())  # the record sets nothing global for a reader
    info = mlflow.models.get_model_info(f"models:/{output.model_id}")
    assert info.run_id == logged.run_id
    assert info.signature is not None
    assert info.signature.inputs.input_names() == ["a"]
    assert set(info.signature.outputs.input_names()) == {"prediction", "proba_no", "proba_yes"}
    assert info.saved_input_example_info is not None


def test_a_skipped_job_without_data_has_no_dataset_input() -> None:
    assert dataset_input("toy", "missing", 0) is None
    assert dataset_input("toy", "", 0) is None


def test_experiments_open_as_model_training_not_genai(home: Path) -> None:
    execution = start_execution("unit")
    experiment = store.client().get_experiment(execution.experiment_id)
    assert experiment.tags[store.EXPERIMENT_KIND_TAG] == store.MODEL_TRAINING_KIND
    # An experiment made before the tag existed gets it on its next execution.
    store.client().delete_experiment_tag(execution.experiment_id, store.EXPERIMENT_KIND_TAG)
    start_execution("unit")
    experiment = store.client().get_experiment(execution.experiment_id)
    assert experiment.tags[store.EXPERIMENT_KIND_TAG] == store.MODEL_TRAINING_KIND


def test_the_selection_is_plain_params_and_reads_back_for_a_resume(home: Path) -> None:
    selection = {"datasets": ["breast_cancer", "penguins"], "folds": 2, "budget": "smoke",
                 "frameworks": [{"name": "constant"}, {"name": "hgb", "variant": "fast"}]}
    execution = start_execution("unit", selection=selection)
    params = store.client().get_run(execution.execution_id).data.params
    assert params == {"datasets": "breast_cancer, penguins", "folds": "2", "budget": "smoke",
                      "frameworks": "constant, hgb:fast"}
    assert execution_selection(execution.execution_id) == selection

    with_params = {"frameworks": [{"name": "rf", "params": {"n_estimators": 50}}], "folds": 1}
    execution = start_execution("unit", selection=with_params)
    assert execution_selection(execution.execution_id) == with_params


def test_an_older_execution_with_json_params_still_resumes(home: Path) -> None:
    execution = start_execution("unit")
    store.client().log_batch(execution.execution_id, params=[
        mlflow.entities.Param("budget", '"smoke"'), mlflow.entities.Param("folds", "2"),
        mlflow.entities.Param("frameworks", '[{"name": "constant"}]')])
    assert execution_selection(execution.execution_id) == {
        "budget": "smoke", "folds": 2, "frameworks": [{"name": "constant"}]}


def test_a_finished_execution_carries_its_key_numbers(home: Path) -> None:
    execution = start_execution("unit")
    finish_execution(execution, counts={"ok": 4, "failed": 1, "timeout": 1, "skipped": 2},
                              best={"breast_cancer": "autogluon", "wage": "hgb"})
    run = store.client().get_run(execution.execution_id)
    assert set(EXECUTION_METRICS) <= set(run.data.metrics)
    assert run.data.metrics == {"jobs": 8, "jobs_ok": 4, "jobs_failed": 2, "jobs_skipped": 2}
    assert run.data.tags["best.breast_cancer"] == "autogluon" and run.data.tags["best.wage"] == "hgb"


def test_links_point_at_the_runs_table_and_strip_credentials(home: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    view = "?workflowType=machine_learning"  # MLflow 3's model-training pages, not its GenAI ones
    assert store.experiment_url("3") == f"http://127.0.0.1:5000/#/experiments/3/runs{view}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://admin:secret@127.0.0.1:5050/")
    assert store.run_url("3", "abc") == f"http://127.0.0.1:5050/#/experiments/3/runs/abc{view}"
    monkeypatch.setenv(store.UI_URL_ENV, "https://mlflow.example.org/")
    assert store.experiment_url("3") == f"https://mlflow.example.org/#/experiments/3/runs{view}"


@pytest.mark.parametrize(("predictions", "declared"), [
    ("row,truth,prediction,proba_0,proba_1\n0,1,1,0.2,0.8\n1,0,0,0.9,0.1\n", "string"),  # labels
    ("row,truth,prediction\n0,1.5,1.25\n1,2.0,2\n", "double"),  # values
])
def test_the_signature_declares_integer_like_labels_as_the_strings_the_model_returns(
    tmp_path: Path, predictions: str, declared: str
) -> None:
    import pandas as pd

    from tasks.tracking.pyfunc import signature_and_example

    pd.DataFrame({"a": [0.5, 1.5]}).to_parquet(tmp_path / "example.parquet", index=False)
    (tmp_path / "predictions.csv").write_text(predictions)

    signature, _ = signature_and_example(tmp_path / "example.parquet", tmp_path / "predictions.csv")

    types = {spec.name: spec.type.name for spec in signature.outputs.inputs}
    assert types["prediction"] == declared
