"""The logged model takes its dataset's own rows both ways a user sends them: a pandas frame in process
(int64 columns, NaN where a value is missing) and JSON over HTTP (null where a value is missing). An
integer feature column that may be missing is declared `Any` and checked by the wrapper, and MLflow
has no integer column to warn about."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import yaml
from mlflow.pyfunc.scoring_server import invocations

from tasks.data.fold_data import load_fold
from tasks.data.load import load_frame
from tasks.frameworks.registry import load_saved_model
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import MODEL_DIR
from tasks.specs import Budget, load_dataset_spec
from tasks.tracking import store
from tasks.tracking.execution import start_execution
from tasks.tracking.job_folder import mark_result_final, write_pending
from tasks.tracking.job_run import PYFUNC_NAME, log_job_dir
from tasks.tracking.signature import never_missing, signature_for

BUDGET = Budget(name="signature", time_s=30, cores=1, memory_mb=2000)


def _types(schema: mlflow.types.Schema) -> dict[str, str]:
    # A DataType has a name (double, long, string); AnyType prints as "Any".
    return {spec.name: getattr(spec.type, "name", str(spec.type)).lower() for spec in schema.inputs}


def test_a_logged_model_predicts_its_own_rows_in_process_and_over_http_missing_values_included(
    data_home, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = data_home("credit_data")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    spec = load_dataset_spec("credit_data")
    fold = load_fold(spec, 0)
    # The card's data as a user reads it: integer columns, and float columns with missing values.
    own_rows = pd.read_csv(home / "datasets" / "credit_data.csv").drop(columns=[spec.target])
    assert own_rows["Seniority"].dtype == np.int64
    assert own_rows["Income"].isna().any() and own_rows["Income"].dropna().eq(
        own_rows["Income"].dropna().round()).all()  # whole numbers, made floats by their missing values

    # A real job (hgb in the worker), logged as every job is, then loaded back from the store.
    job = Job("unit", "credit_data", "v0", "hgb", None, 0, 0, BUDGET, {})
    job_dir = home / "runs" / job.key
    execution = start_execution("unit")
    write_pending(job_dir, execution, job, problem_type="binary", metric="auc")
    result = run_job(job, spec, job_dir)
    assert result.status == "ok", result.error
    mark_result_final(job_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        logged = log_job_dir(job_dir)
    assert not [w for w in caught if "integer column" in str(w.message)], [str(w.message) for w in caught]
    mlflow.set_tracking_uri(store.tracking_uri())  # the record sets nothing global for a reader
    model = mlflow.pyfunc.load_model(f"runs:/{logged.run_id}/{PYFUNC_NAME}")
    declared = _types(model.metadata.get_input_schema())
    assert declared["Seniority"] == declared["Age"] == "any" and declared["Home"] == "string"
    assert declared["Income"] == "double"
    fitted, _ = load_saved_model(job_dir / MODEL_DIR)

    # In process, on every row of the dataset's own file, int64 columns and missing values alike.
    in_process = model.predict(own_rows)
    assert len(in_process) == len(own_rows)
    # The same rows as the harness loads them (typed by the card) give the same probabilities.
    typed_rows = load_frame(spec).drop(columns=[spec.target])
    expected = fitted.predict_proba(typed_rows)["good"].to_numpy()
    assert in_process["proba_good"].to_numpy() == pytest.approx(expected)

    # One request as a client sends it: JSON, the applicant's Seniority and Income unknown (null).
    row = fold.X_test.head(1).astype(object).where(fold.X_test.head(1).notna(), None)
    row.loc[row.index[0], ["Seniority", "Income"]] = None
    request = json.dumps({"dataframe_split": {"columns": list(row.columns), "data": row.values.tolist()}})
    served = invocations(request, "application/json", model, model.metadata.get_input_schema())
    assert served.status == 200, served.response
    [prediction] = json.loads(served.response)["predictions"]

    # What the harness's own model says for that row.
    expected_row = fold.X_test.head(1).copy()
    expected_row[["Seniority", "Income"]] = np.nan
    assert prediction["prediction"] == str(fitted.predict(expected_row)[0])
    expected_good = float(fitted.predict_proba(expected_row)["good"].iloc[0])
    assert prediction["proba_good"] == pytest.approx(expected_good)

    # A value that is not a number in an integer column is refused, naming the column, both ways.
    row.loc[row.index[0], "Seniority"] = "ten years"
    request = json.dumps({"dataframe_split": {"columns": list(row.columns), "data": row.values.tolist()}})
    # The scoring server's app answers an MlflowException with the status of its error code.
    with pytest.raises(mlflow.exceptions.MlflowException, match="'Seniority' takes numbers") as refused:
        invocations(request, "application/json", model, model.metadata.get_input_schema())
    assert refused.value.get_http_status_code() == 400
    with pytest.raises(mlflow.exceptions.MlflowException, match="'Seniority' takes numbers"):
        model.predict(own_rows.head(3).astype({"Seniority": object}).assign(Seniority="ten years"))


def test_a_column_the_card_says_is_never_missing_stays_an_integer(data_home) -> None:
    home = data_home("penguins")
    card = home / "specs" / "datasets" / "penguins.yaml"
    fields = yaml.safe_load(card.read_text(encoding="utf-8"))
    not_null = {"expectation": "ExpectColumnValuesToNotBeNull", "kwargs": {"column": "year"}}
    fields["expectations"].append(not_null)
    card.write_text(yaml.safe_dump(fields, sort_keys=False), encoding="utf-8")
    assert never_missing("penguins") == {"year"}
    assert never_missing("no_such_card") == frozenset()

    example = pd.DataFrame({"year": [2007, 2008], "flipper_length_mm": [181, 186], "bill": [39.1, 39.5]})
    output = pd.DataFrame({"prediction": [3, 4]})  # a regression's values happen to be whole here
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even MLflow's hint about the integer column kept
        signature, declared_example = signature_for(example, output, never_missing("penguins"))
    assert _types(signature.inputs) == {"year": "long", "flipper_length_mm": "any", "bill": "double"}
    assert _types(signature.outputs) == {"prediction": "double"}
    assert declared_example["flipper_length_mm"].dtype == np.float64


@pytest.mark.parametrize(("verbose", "shown"), [(False, False), (True, True)])
def test_mlflow_warnings_reach_the_terminal_only_with_verbose(tmp_path: Path, verbose: bool,
                                                              shown: bool) -> None:
    # A process of its own: the CLI's set-up changes the environment and the warning filters.
    script = (
        "import logging, pandas as pd\n"
        "from flows.cli_run import configure_embedded_prefect\n"
        f"configure_embedded_prefect(verbose={verbose})\n"
        "from mlflow.types.utils import _infer_schema\n"
        "_infer_schema(pd.DataFrame({'a': [1, 2]}))  # MLflow's hint about an integer column\n"
        "logging.getLogger('mlflow.models').warning('a warning of MLflow')\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_LOGGING", "PYTHONWARNINGS"))}
    env["AUTOML_EVAL_HOME"] = str(tmp_path)
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                         env=env, cwd=Path(__file__).resolve().parents[2])
    assert ran.returncode == 0, ran.stderr
    assert ("Hint: Inferred schema contains integer column" in ran.stderr) is shown, ran.stderr
    assert ("a warning of MLflow" in ran.stderr) is shown, ran.stderr
