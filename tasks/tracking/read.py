"""Runs back out of MLflow, as pandas DataFrames for the reports; plus the report's few writes.

Columns are named by tasks.vocabulary: job tags and metrics under their own names (`dataset`,
`framework`, `result`, `fit_s`, ...), params under `params.<name>` (`params.fold`,
`params.param.max_depth`), and the run's own fields `run_id`, `parent_run_id`, `experiment_id`,
`start_time`, `end_time`, `run_status`. A job run is a run with a `job_key` tag; an execution
(the parent run of one suite execution) is a run with an `execution_state` tag.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import pandas as pd
from mlflow.entities import Run, ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from tasks.anytime import ANYTIME_FILE
from tasks.errors import UserError
from tasks.resources import SERIES_FILE
from tasks.results import TRAINING_CURVE_FILE
from tasks.tracking import store
from tasks.vocabulary import JOB_TAGS

PAGE_SIZE = 10_000  # fewer round trips to a tracking server; sqlite answers 5,000 runs in one page
PARENT_TAG = "mlflow.parentRunId"
EXECUTION_FILTER = "tags.execution_state LIKE '%'"


def tracking_uri() -> str:
    """The same store the runs were written to (tasks.tracking.store decides)."""
    return store.tracking_uri()


def client(uri: str | None = None) -> MlflowClient:
    """The store's client; one per URI and process (opening a SQL store checks its schema, slowly)."""
    if uri is None:
            return store.client()
    return _client_for(uri)


@lru_cache(maxsize=8)
def _client_for(uri: str) -> MlflowClient:
    return MlflowClient(tracking_uri=uri)


def _pages(
    mlflow_client: MlflowClient,
    experiment_ids: list[str],
    filter_string: str,
    order_by: list[str] | None = None,
) -> Iterator[Run]:
    page_token = None
    while True:
        page = mlflow_client.search_runs(
            experiment_ids,
            filter_string=filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=PAGE_SIZE,
            order_by=order_by,
            page_token=page_token,
        )
        yield from page
        page_token = page.token
        if not page_token:
            return


def _all_experiment_ids(mlflow_client: MlflowClient) -> list[str]:
    return [e.experiment_id for e in mlflow_client.search_experiments(view_type=ViewType.ACTIVE_ONLY)]


def _experiment_ids(mlflow_client: MlflowClient, suite: str | None) -> list[str]:
    if suite is None:
        return _all_experiment_ids(mlflow_client)
    experiment = mlflow_client.get_experiment_by_name(suite)
    if experiment is None:
        known = ", ".join(sorted(e.name for e in mlflow_client.search_experiments())) or "none"
        raise UserError(
            f"no results for suite '{suite}' in the MLflow store {mlflow_client.tracking_uri}; "
            f"run `automl-eval run {suite}` first (suites with results: {known})."
        )
    return [experiment.experiment_id]


def _row(run: Run) -> dict[str, Any]:
    info, data = run.info, run.data
    row: dict[str, Any] = {key: "" for key in JOB_TAGS}
    row.update({key: value for key, value in data.tags.items() if not key.startswith("mlflow.")})
    row.update(data.metrics)
    row.update({f"params.{key}": value for key, value in data.params.items()})
    row.update(
        {
            "run_id": info.run_id,
            "parent_run_id": data.tags.get(PARENT_TAG, ""),
            "experiment_id": info.experiment_id,
            "start_time": info.start_time,
            "end_time": info.end_time,
            "run_status": info.status,
        }
    )
    return row


def _frame(runs: Iterator[Run]) -> pd.DataFrame:
    frame = pd.DataFrame.from_records([_row(run) for run in runs])
    for column in ("start_time", "end_time"):
        if column in frame:
            frame[column] = pd.to_datetime(frame[column], unit="ms", utc=True)
    return frame


def job_runs(
    *,
    execution_id: str | None = None,
    suite: str | None = None,
    filter_string: str | None = None,
    uri: str | None = None,
) -> pd.DataFrame:
    """The job runs of one execution, of every execution of a suite, or matching an MLflow filter.

    Parent runs are dropped here rather than by a `job_key` clause in the filter: every extra tag
    clause is another join in a SQL store and made a 5,000-run read half again as slow.
    """
    mlflow_client = client(uri)
    clauses = []
    if execution_id:
        clauses.append(f"tags.execution_id = '{execution_id}'")
        experiment_ids = [_run(mlflow_client, execution_id).info.experiment_id]
    else:
        experiment_ids = _experiment_ids(mlflow_client, suite)
    if filter_string:
        clauses.append(filter_string)
    try:
        frame = _frame(_pages(mlflow_client, experiment_ids, " and ".join(clauses)))
    except MlflowException as exc:
        raise UserError(
            f"MLflow rejected the filter '{filter_string}': {exc.message.splitlines()[0]} "
            "(example: \"tags.dataset = 'iris' and metrics.result > 0.9\")."
        ) from None
    if frame.empty:
        return frame
    return frame[frame["job_key"].fillna("") != ""].reset_index(drop=True)


def _run(mlflow_client: MlflowClient, run_id: str) -> Run:
    try:
        return mlflow_client.get_run(run_id)
    except MlflowException:
        raise UserError(
            f"no run with id '{run_id}' in the MLflow store {mlflow_client.tracking_uri}; "
            "list executions with `automl-eval report --list`."
        ) from None


def executions(*, suite: str | None = None, uri: str | None = None) -> pd.DataFrame:
    """Suite executions (parent runs), newest first: execution_id, suite, team, state, start time, ..."""
    mlflow_client = client(uri)
    frame = _frame(
        _pages(
            mlflow_client,
            _experiment_ids(mlflow_client, suite),
            EXECUTION_FILTER,
            order_by=["attributes.start_time DESC"],
        )
    )
    if frame.empty:
        return frame
    frame["execution_id"] = frame["run_id"]
    return frame.sort_values("start_time", ascending=False, ignore_index=True)


def execution(execution_id: str, *, uri: str | None = None) -> dict[str, Any]:
    """One execution's fields (tags, run status, times) as a flat mapping."""
    row = _row(_run(client(uri), execution_id))
    row["execution_id"] = row["run_id"]
    for column in ("start_time", "end_time"):
        if row[column] is not None:
            row[column] = pd.to_datetime(row[column], unit="ms", utc=True)
    return row


@contextmanager
def _no_progress_bars() -> Iterator[None]:
    """MLflow draws a progress bar per download on stderr: dozens of lines for one comparison."""
    name = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    before = os.environ.get(name)
    os.environ[name] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def job_series(run_ids: list[str], *, uri: str | None = None) -> dict[str, dict[str, pd.DataFrame]]:
    """run id -> {artifact name: frame} for the time series each job run holds (resources.csv,
    training_curve.csv); runs recorded before they were saved hold none."""
    mlflow_client = client(uri)
    series: dict[str, dict[str, pd.DataFrame]] = {}
    with tempfile.TemporaryDirectory(prefix="automl-eval-series-") as scratch:
        for run_id in run_ids:
            names = {item.path for item in mlflow_client.list_artifacts(run_id)}
            for name in (SERIES_FILE, TRAINING_CURVE_FILE):
                if name not in names:
                    continue
                with _no_progress_bars():
                    local = mlflow_client.download_artifacts(run_id, name, dst_path=f"{scratch}/{run_id}")
                try:
                    frame = pd.read_csv(local)
                except (OSError, ValueError, pd.errors.ParserError) as exc:
                    raise UserError(
                        f"run {run_id}: its artifact {name} is not a readable CSV ({exc}); "
                        "delete the artifact or re-run the job."
                    ) from None
                series.setdefault(run_id, {})[name] = frame
    return series


def log_folder(run_id: str, folder: Path, *, artifact_path: str = "report", uri: str | None = None) -> None:
    """Attach a folder (the report) to a run as artifacts."""
    client(uri).log_artifacts(run_id, str(folder), artifact_path=artifact_path)


def evaluation_tables(runs: pd.DataFrame, evaluation: str, file: str, *,
                      uri: str | None = None) -> pd.DataFrame:
    """One CSV an evaluation left on each job run (`evaluations/EVALUATION/FILE`), stacked, with the
    run's dataset, framework, fold and seed in front; runs without it are skipped."""
    status_tag = f"evaluation.{evaluation}"
    if runs.empty or status_tag not in runs:
        return pd.DataFrame()
    tables = []
    mlflow_client = client(uri)
    with tempfile.TemporaryDirectory() as scratch:
        for row in runs[runs[status_tag].fillna("").isin(["ok", "partial"])].to_dict("records"):
            try:
                artifact = f"evaluations/{evaluation}/{file}"
                path = mlflow_client.download_artifacts(row["run_id"], artifact, scratch)
                table = pd.read_csv(path)
            except (MlflowException, OSError, pd.errors.EmptyDataError):
                continue
            for key in ("seed", "fold", "framework", "dataset"):
                if key in table:  # the evaluation's own column of that name keeps its data, renamed
                    table = table.rename(columns={key: f"{evaluation}_{key}"})
                table.insert(0, key, row.get(key) if key in row else row.get(f"params.{key}"))
            tables.append(table)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def forecast_predictions(runs: pd.DataFrame, *, uri: str | None = None) -> pd.DataFrame:
    """The predictions.csv of every finished forecasting job run, stacked, with the run's dataset,
    framework, fold and seed in front (the report's forecast plots); empty when there are none."""
    if runs.empty or "problem_type" not in runs:
        return pd.DataFrame()
    status = runs["status"] if "status" in runs else pd.Series("", index=runs.index)
    chosen = runs[(runs["problem_type"] == "forecasting") & (status == "ok")]
    tables = []
    mlflow_client = client(uri)
    with tempfile.TemporaryDirectory() as scratch:
        for row in chosen.to_dict("records"):
            try:
                path = mlflow_client.download_artifacts(row["run_id"], "predictions.csv", scratch)
                table = pd.read_csv(path)
            except (MlflowException, OSError, pd.errors.EmptyDataError):
                continue
            for key in ("seed", "fold", "framework", "dataset"):
                table.insert(0, key, row.get(key) if key in row else row.get(f"params.{key}"))
            tables.append(table)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def anytime_curves(runs: pd.DataFrame, *, uri: str | None = None) -> pd.DataFrame:
    """The anytime.csv of every finished job run that has a curve, stacked, with the run's dataset,
    framework, fold and seed in front (the report's score-over-time figures); empty when none has."""
    if runs.empty or "anytime_points" not in runs:
        return pd.DataFrame()
    status = runs["status"] if "status" in runs else pd.Series("", index=runs.index)
    chosen = runs[(status == "ok") & pd.to_numeric(runs["anytime_points"], errors="coerce").notna()]
    tables = []
    mlflow_client = client(uri)
    with tempfile.TemporaryDirectory() as scratch, _no_progress_bars():
        for row in chosen.to_dict("records"):
            try:
                target = f"{scratch}/{row['run_id']}"
                path = mlflow_client.download_artifacts(row["run_id"], ANYTIME_FILE, target)
                table = pd.read_csv(path)
            except (MlflowException, OSError, pd.errors.EmptyDataError, pd.errors.ParserError):
                continue
            for key in ("seed", "fold", "framework", "dataset"):
                table.insert(0, key, row.get(key) if key in row else row.get(f"params.{key}"))
            tables.append(table)
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def set_tag(run_id: str, key: str, value: str, *, uri: str | None = None) -> None:
    client(uri).set_tag(run_id, key, value)


def evaluation_artifacts(run_ids: list[str], evaluation: str, filename: str, folder: Path, *,
                         uri: str | None = None) -> dict[str, Path]:
    """Download `evaluations/EVALUATION/FILENAME` of each run that has it, into folder/RUN_ID/."""
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # one bar per file, otherwise
    mlflow_client = client(uri)
    found: dict[str, Path] = {}
    for run_id in run_ids:
        target = folder / run_id
        target.mkdir(parents=True, exist_ok=True)
        try:
            where = f"evaluations/{evaluation}/{filename}"
            path = mlflow_client.download_artifacts(run_id, where, str(target))
        except (MlflowException, OSError):
            continue  # this run's evaluation wrote no such file
        found[run_id] = Path(path)
    return found
