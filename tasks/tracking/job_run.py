"""A job's record: one child run of its execution per job, logged once from its job folder.

Everything is logged after the job, from what the folder holds (result.json, predictions.csv,
model/, evaluation results, series): tags and params say what ran, metrics what it scored and cost,
and the model is logged as the run's pyfunc model (tasks/evaluations/_pyfunc.py wraps it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import mlflow
import pandas as pd
from mlflow.entities import LoggedModelOutput, LoggedModelStatus, Metric, Param, RunTag
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

from tasks.align import alignment_metrics
from tasks.anytime import ANYTIME_FILE, ANYTIME_METRIC
from tasks.errors import UserError
from tasks.evaluations._pyfunc import save_pyfunc
from tasks.evaluations.stage import evaluation_folder
from tasks.plan import Job, scaling_record
from tasks.resources import SERIES_FILE, SERIES_TIME
from tasks.results import (
    INPUT_EXAMPLE_FILE,
    MODEL_DIR,
    PREDICTIONS_FILE,
    TRAINING_CURVE_FILE,
    JobResult,
)
from tasks.tracking import store
from tasks.tracking.execution import (
    MAX_TAG_CHARS,
    Execution,
    app_version,
    apply_deferred_finishes,
    git_sha,
    resolve_execution,
)
from tasks.tracking.inputs import dataset_input
from tasks.tracking.job_folder import mark_logged, pending_job_dirs, read_record
from tasks.tracking.pyfunc import signature_and_example
from tasks.tracking.recorded import runs_of_job
from tasks.tracking.signature import never_missing
from tasks.tracking.suite_lock import running_elsewhere
from tasks.vocabulary import FINISHED_STATUSES, RESULT, SERIES_METRICS, SERIES_STEPS, evaluation_wall_metric

PYFUNC_NAME = "model"  # the pyfunc model's name inside a job run
_BATCH = 100  # MLflow's limit of params or tags per log_batch call
_METRIC_BATCH = 1000  # and of metrics

logger = logging.getLogger("automl_eval.tracking")


@dataclass(frozen=True)
class LoggedJob:
    run_id: str
    log_s: float  # time spent writing the record, for the benchmark
    already_recorded: bool = False


def job_run_name(job: Job) -> str:
    """Framework first: within a suite's experiment the framework is what differs from row to row,
    and MLflow's narrow name column shows the start of the name."""
    step = f" · {job.scaling.cores}c{job.scaling.gpus}g" if job.scaling is not None else ""
    return f"{job.framework_id} · {job.dataset} · f{job.fold} s{job.seed}{step}"


def unix_ms(stamp: str) -> int | None:
    """An ISO time (result.json's started_utc/ended_utc) as MLflow's epoch milliseconds."""
    try:
        return int(datetime.fromisoformat(stamp).timestamp() * 1000)
    except (TypeError, ValueError):
        return None


def log_job(execution: Execution, job: Job, result: JobResult, job_dir: Path, *,
            problem_type: str, metric: str) -> LoggedJob:
    """Record one job as a child run of its execution, once.

    A job key already recorded as finished in this execution is not recorded again; an earlier
    failed record of the same key is replaced (deleted) by this one, so retries never duplicate.
    """
    started = time.perf_counter()
    client = store.client()
    execution = resolve_execution(execution)
    with store.write_lock:
        earlier = runs_of_job(execution.execution_id, execution.experiment_id, job.key)
        for run in earlier:
            if run.data.tags.get("status") in FINISHED_STATUSES:
                mark_logged(job_dir, run.info.run_id)
                return LoggedJob(run.info.run_id, time.perf_counter() - started, already_recorded=True)
        # The job's own start and end, so MLflow's Duration is the job's, not the logging's.
        started_ms, ended_ms = unix_ms(result.started_utc), unix_ms(result.ended_utc)
        if started_ms is not None and ended_ms is not None and ended_ms < started_ms:
            ended_ms = started_ms
        # The run's name and parent are given here, where creating the run writes them, not in the
        # batch below: there MLflow's store updates the run's row again for each of them.
        run = client.create_run(execution.experiment_id, run_name=job_run_name(job), start_time=started_ms,
                                tags={"execution_id": execution.execution_id,
                                      "mlflow.parentRunId": execution.execution_id})
        run_id = run.info.run_id
        try:
            # The model goes first: logged after the metrics, MLflow would read each metric's
            # history back to link it to the model (a request per metric).
            model_dir = job_dir / MODEL_DIR
            if result.status == "ok" and model_dir.is_dir():
                _log_pyfunc(run_id, execution.experiment_id, job, result, job_dir)
            metrics = {**_alignment_metrics(job.dataset), **_job_metrics(result)}
            _log_batches(run_id, [*_metric_items(metrics), *_series_steps(job_dir)], _job_params(job),
                         _job_tags(execution, job, result, problem_type, metric))
            data_input = dataset_input(job.dataset, job.data_version, job.fold)
            if data_input is not None:
                _log_input(client, run_id, data_input)
            _log_files(run.info.artifact_uri, _run_files(job_dir, result))
        except BaseException:
            # Half a record must not count as a record: drop it so the job can be logged again.
            client.delete_run(run_id)
            raise
        client.set_terminated(run_id, status="FINISHED" if result.status in FINISHED_STATUSES else "FAILED",
                              end_time=ended_ms)
        for run in earlier:
            client.delete_run(run.info.run_id)
        mark_logged(job_dir, run_id)
    return LoggedJob(run_id, time.perf_counter() - started)


def _log_input(client: Any, run_id: str, data_input: Any) -> None:
    """The job's dataset as the run's input. Two jobs of one dataset recorded at the same moment (two
    team workers) race to create its dataset entity in MLflow's store: the loser's request fails (a
    unique-key violation on PostgreSQL, 400 from the server) although the entity now exists, and it
    cost its job the record. Asked once more, MLflow finds the entity and only links it."""
    try:
        client.log_inputs(run_id, datasets=[data_input])
    except mlflow.exceptions.MlflowException as exc:
        logger.info("dataset input of run %s asked again (%s)", run_id, str(exc).splitlines()[0][:200])
        time.sleep(0.5)
        client.log_inputs(run_id, datasets=[data_input])


def log_job_dir(job_dir: Path) -> LoggedJob:
    """Log one pending job folder from what it holds."""
    record = read_record(job_dir)
    execution = Execution(**record["execution"])
    job = Job.from_dict(record["job"])
    result = JobResult.load(job_dir)
    return log_job(execution, job, result, job_dir, problem_type=record["problem_type"],
                   metric=record["metric"])


def sync_pending(root: Path | None = None) -> list[LoggedJob]:
    """Log every finished but unlogged job folder (e.g. the tracking server was down), then end
    the executions whose end waited for them."""
    # A suite another process is running now logs its own folders (two writers would race).
    pending = [job_dir for job_dir in pending_job_dirs(root) if not running_elsewhere(job_dir.parent.name)]
    logged = [log_job_dir(job_dir) for job_dir in pending]
    apply_deferred_finishes()
    return logged


def _job_tags(execution: Execution, job: Job, result: JobResult, problem_type: str,
              metric: str) -> dict[str, str]:
    host = result.host or {}
    tags = {
        "suite": job.suite,
        "execution_id": execution.execution_id,
        "job_key": job.key,
        "status": result.status,
        "framework": job.framework_id,
        "framework_name": job.framework,
        "framework_version": result.framework_version or "unknown",
        "dataset": job.dataset,
        "data_version": job.data_version,
        "problem_type": problem_type,
        "metric": metric,
        "budget": job.budget.name,
        "fold": str(job.fold),
        "seed": str(job.seed),
        "git_sha": git_sha(),
        "app_version": app_version(),
        "host": host.get("host") or platform.node(),
        "cpu_model": host.get("cpu_model") or platform.processor() or platform.machine(),
        "gpu_model": host.get("gpu_model") or "none",
        "team": execution.team,
    }
    if result.error:
        tags["error"] = result.error[-MAX_TAG_CHARS:]
    # Every job run says where its energy came from, so a search on energy_source finds them all; a job
    # that ended before the worker measured anything says that instead of leaving the tag out.
    energy = result.info.get("energy") or {"source": "none", "reason": "the job recorded no energy reading"}
    tags["energy_source"] = str(energy.get("source", "none"))
    if energy.get("reason"):
        tags["energy_reason"] = str(energy["reason"])[-MAX_TAG_CHARS:]
    tags.update(scaling_record(job, result.info)[1])
    anytime = result.info.get("anytime") or {}
    if anytime.get("reason"):  # the report lists the frameworks without a curve with this
        tags["anytime_reason"] = str(anytime["reason"])[-MAX_TAG_CHARS:]
    for name, outcome in sorted(result.evaluations.items()):
        tags[f"evaluation.{name}"] = str(outcome.get("status", ""))
        if outcome.get("reason"):
            tags[f"evaluation.{name}.reason"] = str(outcome["reason"])[-MAX_TAG_CHARS:]
        tags.update({key: str(value)[-MAX_TAG_CHARS:] for key, value in outcome.get("tags", {}).items()})
    return tags


def _job_params(job: Job) -> dict[str, str]:
    params = {
        "fold": str(job.fold),
        "seed": str(job.seed),
        "budget_time_s": str(job.budget.time_s),
        "budget_cores": str(job.budget.cores),
        "budget_memory_mb": str(job.budget.memory_mb),
        "budget_gpus": str(job.budget.gpus),
    }
    params.update(scaling_record(job, {})[0])
    for name, value in sorted(job.params.items()):
        params[f"param.{name}"] = value if isinstance(value, str) else json.dumps(value, default=str)
    return params


def _alignment_metrics(dataset: str) -> dict[str, float]:
    """The `align_*` figures of a multimodal dataset (none for others, or for an unknown card)."""
    try:
        return alignment_metrics(dataset)
    except (UserError, OSError, ValueError, TypeError) as exc:
        # The job's own figures matter more than these: a broken report must not block its record.
        logger.warning("alignment figures of '%s' not logged: %s", dataset, exc)
        return {}


def _job_metrics(result: JobResult) -> dict[str, float]:
    figures: dict[str, Any] = {**result.scores, **result.costs}
    for name, outcome in result.evaluations.items():
        figures.update(outcome.get("metrics", {}))
        if outcome.get("wall_s"):
            figures[evaluation_wall_metric(name)] = outcome["wall_s"]
    # No fake zeros: a figure that was not measured is simply absent from the run.
    return {name: float(value) for name, value in figures.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}


def _metric_items(metrics: dict[str, float]) -> list[Metric]:
    now = int(time.time() * 1000)
    return [Metric(name, value, now, 0) for name, value in metrics.items()]


def _log_batches(run_id: str, metrics: list[Metric], params: dict[str, str], tags: dict[str, str]) -> None:
    """As few log_batch requests as MLflow's limits allow (100 params, 100 tags, 1,000 metrics each):
    one for a usual job, its figures and its series' steps together."""
    client = store.client()
    param_items = [Param(k, v) for k, v in params.items()]
    tag_items = [RunTag(k, v) for k, v in tags.items()]
    rounds = max(1, math.ceil(max(len(param_items) / _BATCH, len(tag_items) / _BATCH,
                                  len(metrics) / _METRIC_BATCH)))
    for index in range(rounds):
        window = slice(index * _BATCH, (index + 1) * _BATCH)
        client.log_batch(run_id, metrics=metrics[index * _METRIC_BATCH:(index + 1) * _METRIC_BATCH],
                         params=param_items[window], tags=tag_items[window])


def _series_steps(job_dir: Path) -> list[Metric]:
    """The job's time series as step metrics (a few points each, for MLflow's charts)."""
    now, steps = int(time.time() * 1000), []
    step_by_file: tuple[tuple[str, Callable[[dict[str, Any]], int]], ...] = (
        (SERIES_FILE, lambda row: int(1000 * row[SERIES_TIME])),
        (TRAINING_CURVE_FILE, lambda row: int(row["step"])),
        (ANYTIME_FILE, lambda row: int(1000 * row["elapsed_s"])))
    for name, step_of in step_by_file:
        path = job_dir / name
        if not path.is_file():
            continue
        frame = pd.read_csv(path)
        frame = frame.iloc[:: max(1, math.ceil(len(frame) / SERIES_STEPS))]
        for column in frame.columns:
            metric = column if column in SERIES_METRICS else f"series_{column}"
            if name == ANYTIME_FILE:  # its `result` column is the curve; its other columns are not series
                metric = ANYTIME_METRIC if column == RESULT else ""
            if metric not in SERIES_METRICS:
                continue
            steps += [Metric(metric, float(row[column]), now, step_of(row))
                      for row in frame.to_dict("records") if math.isfinite(row[column])]
    return steps


def _run_files(job_dir: Path, result: JobResult) -> dict[str, Path]:
    """The run's files, by where they go under its artifacts: predictions.csv; resources.csv,
    training_curve.csv and anytime.csv (what `compare` aligns); each evaluation's result.json and the
    files it lists, under `evaluations/NAME/` (a listed file outside its evaluation's folder is not)."""
    names = (PREDICTIONS_FILE, SERIES_FILE, TRAINING_CURVE_FILE, ANYTIME_FILE)
    files = {name: job_dir / name for name in names if (job_dir / name).is_file()}
    for name, outcome in sorted(result.evaluations.items()):
        folder = evaluation_folder(job_dir, name).resolve()
        for relative in ["result.json", *outcome.get("files", [])]:
            path = (folder / relative).resolve()
            if path.is_file() and path.is_relative_to(folder):
                files[f"evaluations/{name}/{path.relative_to(folder).as_posix()}"] = path
    return files


def _log_files(artifact_uri: str, files: dict[str, Path]) -> None:
    """Upload the run's files to its artifact store, found from the URI the run was created with:
    MLflow's `log_artifact` would first ask the server for the run (a request per run)."""
    if not files:
        return
    repository = get_artifact_repository(artifact_uri, tracking_uri=store.tracking_uri())
    for where, path in files.items():
        parent = Path(where).parent.as_posix()
        repository.log_artifact(str(path), None if parent == "." else parent)


def _log_pyfunc(run_id: str, experiment_id: str, job: Job, result: JobResult, job_dir: Path) -> None:
    """The job's model as a pyfunc model of its run, with the signature and input example the
    worker's test rows give (so MLflow shows its schema and serving checks its input)."""
    signature, example = signature_and_example(job_dir / INPUT_EXAMPLE_FILE, job_dir / PREDICTIONS_FILE,
                                               never_missing(job.dataset))
    try:
        _log_model(run_id, experiment_id, job, result, job_dir, signature, example)
    except mlflow.exceptions.MlflowException as exc:
        if signature is None:
            raise
        # An example MLflow cannot hold to its own schema must not cost the job its record.
        logger.warning("%s: model logged without a signature (%s)", job.label, str(exc).splitlines()[0])
        _log_model(run_id, experiment_id, job, result, job_dir, None, None)


def _log_model(run_id: str, experiment_id: str, job: Job, result: JobResult, job_dir: Path,
               signature: Any, example: Any) -> None:
    """MLflow's logged model, made in the steps `Model.log` takes, less its three requests that read
    back what this function already holds (the logged model twice, the run once): create it, link it
    to the run as an output, save the pyfunc model locally (save_pyfunc, the job's model/ folder as
    one archive), upload its folder to the logged model's own artifact location, mark it ready.

    No model is validated by loading it here (Model.log's serving-input check would load an H2O model,
    starting a JVM in the harness)."""
    client = store.client()
    logged = client.create_logged_model(experiment_id, name=PYFUNC_NAME, source_run_id=run_id,
                                        params=_job_params(job))
    try:
        client.log_outputs(run_id, models=[LoggedModelOutput(logged.model_id, step=0)])
        with tempfile.TemporaryDirectory(prefix="automl-eval-log-model-") as scratch:
            described = mlflow.models.Model(artifact_path=logged.artifact_location,
                                            model_uuid=logged.model_id, run_id=run_id,
                                            model_id=logged.model_id)
            local = save_pyfunc(job_dir / MODEL_DIR, Path(scratch) / PYFUNC_NAME, job.framework,
                                result.framework_version, signature=signature, input_example=example,
                                mlflow_model=described, archived=True)
            repository = get_artifact_repository(logged.artifact_location, tracking_uri=store.tracking_uri())
            repository.log_artifacts(str(local))
    except BaseException:
        with contextlib.suppress(Exception):  # the run is deleted next; the model says it failed
            client.finalize_logged_model(logged.model_id, LoggedModelStatus.FAILED)
        raise
    client.finalize_logged_model(logged.model_id, LoggedModelStatus.READY)
