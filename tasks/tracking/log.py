"""Write the record: one experiment per suite, a parent run per execution, a child run per job.

Everything is logged after the job, from what its job folder holds (result.json, predictions.csv,
model/). A small ``tracking.json`` in the job folder says which execution the job belongs to and,
once logged, which run holds it; a folder without that run id is logged later by ``sync_pending``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import platform
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import Metric, Param, RunTag

from tasks import paths
from tasks.align import alignment_metrics
from tasks.align import report_path as alignment_report_path
from tasks.errors import UserError
from tasks.multimodal.combinations import split_name
from tasks.plan import Job
from tasks.resources import SERIES_FILE, SERIES_TIME
from tasks.results import (
    INPUT_EXAMPLE_FILE,
    MODEL_DIR,
    PREDICTIONS_FILE,
    RESULT_FILE,
    TRAINING_CURVE_FILE,
    JobResult,
)
from tasks.specs import FrameworkRef, load_dataset_spec
from tasks.tracking import store
from tasks.tracking.inputs import dataset_input
from tasks.vocabulary import (
    COST_METRICS,
    EXECUTION_METRICS,
    FINISHED_STATUSES,
    RESULT,
    RETRYABLE_STATUSES,
    SCORE_METRICS,
    SERIES_METRICS,
    SERIES_STEPS,
    evaluation_wall_metric,
)

TRACKING_FILE = "tracking.json"  # in each job folder: execution id, job, and the run once logged
OFFLINE_PREFIX = "offline-"  # an execution started while the store was unreachable
PYFUNC_NAME = "model"  # the pyfunc model's name inside a job run
_BATCH = 100  # MLflow's limit of params or tags per log_batch call
_ERROR_CHARS = 4000

# SQLite allows one writer at a time; jobs finish on several threads, so their logging takes turns.
# It is short next to a job, and it keeps the thread-local active run of the pyfunc logging simple.
_write_lock = threading.Lock()
logger = logging.getLogger("automl_eval.tracking")


@dataclass(frozen=True)
class Execution:
    """One execution of a suite: the parent run all its job runs hang under."""

    suite: str
    execution_id: str  # the parent run id
    experiment_id: str
    team: str = ""

    @property
    def offline(self) -> bool:
        """Started while the store was unreachable: its parent run is created when it answers."""
        return self.execution_id.startswith(OFFLINE_PREFIX)


@dataclass(frozen=True)
class RecordedJob:
    run_id: str
    status: str


@dataclass(frozen=True)
class LoggedJob:
    run_id: str
    log_s: float  # time spent writing the record, for the benchmark
    already_recorded: bool = False


def experiment_name(suite: str) -> str:
    """The MLflow experiment of a suite: its name, so every team finds it under the same name."""
    return suite


def job_run_name(job: Job) -> str:
    """Framework first: within a suite's experiment the framework is what differs from row to row,
    and MLflow's narrow name column shows the start of the name."""
    return f"{job.framework_id} · {job.dataset} · f{job.fold} s{job.seed}"


def unix_ms(stamp: str) -> int | None:
    """An ISO time (result.json's started_utc/ended_utc) as MLflow's epoch milliseconds."""
    try:
        return int(datetime.fromisoformat(stamp).timestamp() * 1000)
    except (TypeError, ValueError):
        return None


# ---------------------------------------------------------------- the selection as plain params


def selection_params(selection: dict[str, Any]) -> dict[str, str]:
    """An execution's selection as params a person reads: `budget=smoke`, `folds=2`,
    `datasets=iris, wine`, `frameworks=constant, hgb:fast`. Frameworks with suite params stay JSON
    (their params are part of what a resume must re-plan)."""
    params = {}
    for key, value in sorted(selection.items()):
        if key == "frameworks" and all(set(entry) <= {"name", "variant", "version"} for entry in value):
            params[key] = ", ".join(FrameworkRef(**entry).id for entry in value)
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            params[key] = ", ".join(value)
        elif isinstance(value, str | int) and not isinstance(value, bool):
            params[key] = str(value)
        else:
            params[key] = json.dumps(value, sort_keys=True)
    return params


def _selection_value(key: str, text: str) -> Any:
    """One param back as the selection value it was written from (earlier JSON-quoted ones too)."""
    if text[:1] in '["{' or text in ("null", "true", "false"):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    if key == "folds" and text.isdigit():
        return int(text)
    if key == "frameworks":
        return [FrameworkRef.parse(name.strip()).model_dump(exclude_defaults=True)
                for name in text.split(",") if name.strip()]
    if key == "datasets":
        return [name.strip() for name in text.split(",") if name.strip()]
    return text


# ---------------------------------------------------------------- context values


@lru_cache(maxsize=1)
def git_sha() -> str:
    try:
        completed = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=paths.project_root(),
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return completed.stdout.strip() or "unknown"


@lru_cache(maxsize=1)
def app_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("automl-eval")
    except metadata.PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- executions (parent runs)


def start_execution(suite: str, *, team: str = "", selection: dict[str, Any] | None = None,
                    budget: str = "", trigger: str = "cli") -> Execution:
    """A fresh parent run; `selection` (frameworks, datasets, folds, budget) is kept as its params
    so a later resume or retry re-plans exactly the same jobs. `trigger` (cli, manual, nightly)
    lets a nightly compare with earlier nightlies only."""
    client = store.client()
    experiment_id = store.experiment_id(experiment_name(suite))
    tags = {
        "suite": suite,
        "execution_state": "running",
        "budget": budget,
        "team": team,
        "trigger": trigger,
        "git_sha": git_sha(),
        "app_version": app_version(),
        "host": platform.node(),
    }
    run = client.create_run(experiment_id, run_name=f"{suite} {time.strftime('%Y-%m-%d %H:%M')}",
                            tags=tags)
    execution_id = run.info.run_id
    client.set_tag(execution_id, "execution_id", execution_id)
    params = [Param(key, value) for key, value in selection_params(selection or {}).items()]
    if params:
        client.log_batch(execution_id, params=params)
    return Execution(suite, execution_id, experiment_id, team)


def _executions_dir() -> Path:
    return paths.runs_dir() / ".executions"


def start_offline_execution(suite: str, *, team: str = "", selection: dict[str, Any] | None = None,
                            budget: str = "", trigger: str = "cli") -> Execution:
    """The store cannot be reached: an execution kept on disk, whose parent run is made later."""
    import uuid

    execution = Execution(suite, f"{OFFLINE_PREFIX}{uuid.uuid4().hex}", "", team)
    path = _executions_dir() / f"{execution.execution_id}.start.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_json(path, {"suite": suite, "team": team, "selection": selection or {}, "budget": budget,
                       "trigger": trigger, "started_at": time.time(), "execution": None})
    return execution


_resolve_lock = threading.Lock()


def resolve_execution(execution: Execution) -> Execution:
    """An offline execution's parent run, created once (the first time the store answers)."""
    if not execution.offline:
        return execution
    path = _executions_dir() / f"{execution.execution_id}.start.json"
    with _resolve_lock:
        record = json.loads(path.read_text())
        if not record.get("execution"):
            created = start_execution(record["suite"], team=record["team"], selection=record["selection"],
                                      budget=record["budget"], trigger=record["trigger"])
            record["execution"] = created.__dict__
            _write_json(path, record)
        return Execution(**record["execution"])


def _execution_from_run(run: Any) -> Execution:
    return Execution(run.data.tags.get("suite", ""), run.info.run_id, run.info.experiment_id,
                     run.data.tags.get("team", ""))


def open_execution(execution_id: str) -> Execution:
    """An existing execution by its id, marked running again."""
    client = store.client()
    run = client.get_run(execution_id)
    if "execution_state" not in run.data.tags:
        raise LookupError(f"run {execution_id} is not a suite execution")
    client.set_tag(execution_id, "execution_state", "running")
    client.update_run(execution_id, status="RUNNING")
    return _execution_from_run(run)


def is_execution_of(execution_id: str, suite: str) -> bool:
    """Whether a run id names an execution (parent run) of this suite in the current store."""
    try:
        run = store.client().get_run(execution_id)
    except Exception:  # not found, or not even a valid id
        return False
    tags = run.data.tags
    return "execution_state" in tags and tags.get("suite") == suite


def execution_selection(execution_id: str) -> dict[str, Any]:
    """The frameworks, datasets, folds and budget an execution was started with."""
    params = store.client().get_run(execution_id).data.params
    return {key: _selection_value(key, value) for key, value in params.items()}


def latest_execution(suite: str, *, unfinished_only: bool = False) -> str | None:
    """The newest execution of a suite (only one that did not finish, if asked), or None."""
    client = store.client()
    experiment = client.get_experiment_by_name(experiment_name(suite))
    if experiment is None:
        return None
    state_filter = "tags.execution_state = 'running'" if unfinished_only else "tags.execution_state LIKE '%'"
    runs = client.search_runs([experiment.experiment_id], filter_string=state_filter,
                              max_results=1, order_by=["attributes.start_time DESC"])
    return runs[0].info.run_id if runs else None


def best_tag(dataset: str) -> str:
    """The parent run's `best.DATASET` tag; characters MLflow refuses in a key (a modality combination's
    `[acc+gyro]`) become `_`."""
    import re

    return "best." + re.sub(r"[^A-Za-z0-9_\-. :/]", "_", dataset)


def finish_execution(execution: Execution, *, summary_markdown: str = "",
                     data_gate_failures: dict[str, str] | None = None,
                     data_gate_accepted: dict[str, str] | None = None,
                     counts: dict[str, int] | None = None, best: dict[str, str] | None = None) -> None:
    """Close the parent run. `counts` (jobs by status) become its `jobs*` metrics and `best`
    (dataset -> framework with the best mean result) its `best.DATASET` tags, so the experiment's
    runs table shows each execution's outcome without opening it."""
    client = store.client()
    with _write_lock:
        tags = [RunTag(best_tag(dataset), framework) for dataset, framework in sorted((best or {}).items())]
        metrics = [Metric(name, float(value), int(time.time() * 1000), 0)
                   for name, value in execution_metrics(counts).items()] if counts is not None else []
        if tags or metrics:
            client.log_batch(execution.execution_id, metrics=metrics, tags=tags)
        gate_tags = {"data_gate_failures": data_gate_failures, "data_gate_accepted": data_gate_accepted}
        for tag, gates in gate_tags.items():
            if gates:
                text = "; ".join(f"{name}: {why}" for name, why in sorted(gates.items()))
                client.set_tag(execution.execution_id, tag, text[-_ERROR_CHARS:])
        if summary_markdown:
            client.log_text(execution.execution_id, summary_markdown, "summary.md")
        client.set_tag(execution.execution_id, "execution_state", "finished")
        client.set_terminated(execution.execution_id, status="FINISHED")


def execution_metrics(counts: dict[str, int] | None) -> dict[str, int]:
    """Jobs by outcome (EXECUTION_METRICS) from the count of jobs per status."""
    counts = counts or {}
    figures = {
        "jobs": sum(counts.values()),
        "jobs_ok": counts.get("ok", 0),
        "jobs_failed": sum(counts.get(status, 0) for status in RETRYABLE_STATUSES),
        "jobs_skipped": counts.get("skipped", 0),
    }
    assert set(figures) == set(EXECUTION_METRICS)
    return figures


@contextmanager
def system_metrics(execution: Execution, sampling_interval_s: float = 15.0) -> Iterator[None]:
    """MLflow system metrics (CPU, memory, disk, network, GPU) on the parent run while jobs run.

    One sampler for the whole execution, every 15 s, keeps it cheap; jobs' own figures come
    from the watchdog's process-tree sampling instead.
    """
    from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

    if execution.offline:  # no parent run to sample into
        yield
        return
    try:
        monitor = SystemMetricsMonitor(execution.execution_id, sampling_interval=sampling_interval_s,
                                       resume_logging=True, tracking_uri=store.tracking_uri())
        monitor.start()
    except Exception as exc:  # a missing sensor never stops a suite
        logger.warning("MLflow system metrics are off for this execution: %s", exc)
        yield
        return
    try:
        yield
    finally:
        from tasks.tracking.breaker import is_open

        # With the store away its last samples cannot be sent: that is said once, by the breaker.
        monitor_log = logging.getLogger("mlflow.system_metrics")
        level = monitor_log.level
        if is_open(execution.execution_id):
            monitor_log.setLevel(logging.CRITICAL)
        try:
            if is_open(execution.execution_id):
                # Its last samples cannot be sent; joining its thread would only wait out requests.
                monitor._shutdown_event.set()
            else:
                monitor.finish()
        finally:
            monitor_log.setLevel(level)


def execution_url(execution: Execution) -> str:
    """Where a person opens the execution's parent run: a tracking server's page, else ""."""
    if execution.offline or not store.is_server():
        return ""
    return (f"{store.tracking_uri().rstrip('/')}/#/experiments/{execution.experiment_id}"
            f"/runs/{execution.execution_id}")


def _deferred_finish_path(execution_id: str) -> Path:
    return _executions_dir() / f"{execution_id}.end.json"


def defer_finish(execution: Execution, *, finished: bool, summary_markdown: str = "",
                 data_gate_failures: dict[str, str] | None = None) -> None:
    """The store is unreachable at the end of a run: keep how the execution ended, for `sync`."""
    record = {"execution": execution.__dict__, "finished": finished, "summary_markdown": summary_markdown,
              "data_gate_failures": data_gate_failures or {}}
    path = _deferred_finish_path(execution.execution_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_json(path, record)


def apply_deferred_finishes() -> list[str]:
    """Finish (or mark unfinished) each execution whose end was kept on disk; returns their ids."""
    applied = []
    for path in sorted(_executions_dir().glob("*.end.json")):
        record = json.loads(path.read_text())
        execution = resolve_execution(Execution(**record["execution"]))
        if record["finished"]:
            finish_execution(execution, summary_markdown=record["summary_markdown"],
                             data_gate_failures=record["data_gate_failures"])
        else:
            mark_unfinished(execution)
        path.unlink()
        applied.append(execution.execution_id)
    return applied


def mark_unfinished(execution: Execution) -> None:
    """Stopped before all its jobs ran (interrupted, or a narrowed run covered part of it).

    Its `execution_state` stays `running`, so the next `run` resumes it; the run status says it stopped.
    """
    store.client().set_terminated(execution.execution_id, status="KILLED")


# ---------------------------------------------------------------- job runs (children)


def recorded_jobs(execution_id: str) -> dict[str, RecordedJob]:
    """job_key -> its run and status, for every job run of an execution."""
    client = store.client()
    experiment_id = client.get_run(execution_id).info.experiment_id
    recorded: dict[str, RecordedJob] = {}
    page_token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=f"tags.execution_id = '{execution_id}' "
                                  "and tags.job_key LIKE '%'", max_results=1000, page_token=page_token)
        for run in page:
            tags = run.data.tags
            recorded[tags["job_key"]] = RecordedJob(run.info.run_id, tags.get("status", ""))
        page_token = page.token
        if not page_token:
            return recorded


def recorded_results(execution_id: str) -> dict[str, JobResult]:
    """job_key -> the JobResult its run holds (status, error, scores, costs), from the record alone.

    What a leaderboard needs wherever the jobs ran: in team mode their folders are on the workers.
    """
    client = store.client()
    experiment_id = client.get_run(execution_id).info.experiment_id
    scores = {name for names in SCORE_METRICS.values() for name in names} | {RESULT}
    results: dict[str, JobResult] = {}
    page_token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=f"tags.execution_id = '{execution_id}' "
                                  "and tags.job_key LIKE '%'", max_results=1000, page_token=page_token)
        for run in page:
            tags, metrics = run.data.tags, run.data.metrics
            results[tags["job_key"]] = JobResult(
                job_key=tags["job_key"],
                status=tags.get("status", ""),
                error=tags.get("error", ""),
                framework_version=tags.get("framework_version", ""),
                scores={k: v for k, v in metrics.items() if k in scores},
                costs={k: v for k, v in metrics.items() if k in COST_METRICS},
                evaluations=_recorded_evaluations(tags, metrics),
            )
        page_token = page.token
        if not page_token:
            return results


def _recorded_evaluations(tags: dict[str, str], metrics: dict[str, float]) -> dict[str, dict[str, Any]]:
    """The evaluations a job run records: status and reason from its tags, figures from its metrics."""
    import re

    from tasks.evaluations.vocabulary import evaluation_metrics, evaluation_tags
    from tasks.vocabulary import name_pattern

    evaluations: dict[str, dict[str, Any]] = {}
    for name, names in evaluation_metrics().items():
        status = tags.get(f"evaluation.{name}")
        if status is None:
            continue
        patterns = [re.compile(name_pattern(metric)) for metric in names]
        evaluations[name] = {
            "status": status,
            "reason": tags.get(f"evaluation.{name}.reason", ""),
            "metrics": {k: v for k, v in metrics.items() if any(p.match(k) for p in patterns)},
            "wall_s": metrics.get(evaluation_wall_metric(name), 0.0),
        }
        recorded = {key: tags[key] for key in evaluation_tags().get(name, {}) if key in tags}
        if recorded:
            evaluations[name]["tags"] = recorded
    return evaluations


def finished_job_keys(execution_id: str) -> set[str]:
    return {key for key, job in recorded_jobs(execution_id).items() if job.status in FINISHED_STATUSES}


def retryable_job_keys(execution_id: str) -> set[str]:
    return {key for key, job in recorded_jobs(execution_id).items() if job.status in RETRYABLE_STATUSES}


def _runs_of_job(execution_id: str, experiment_id: str, job_key: str) -> list[Any]:
    return list(store.client().search_runs(
        [experiment_id],
        filter_string=f"tags.execution_id = '{execution_id}' and tags.job_key = '{job_key}'",
        max_results=100,
    ))


def _job_tags(execution: Execution, job: Job, result: JobResult, problem_type: str,
              metric: str) -> dict[str, str]:
    host = result.host or {}
    tags = {
        "mlflow.parentRunId": execution.execution_id,
        "mlflow.runName": job_run_name(job),
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
        tags["error"] = result.error[-_ERROR_CHARS:]
    for name, outcome in sorted(result.evaluations.items()):
        tags[f"evaluation.{name}"] = str(outcome.get("status", ""))
        if outcome.get("reason"):
            tags[f"evaluation.{name}.reason"] = str(outcome["reason"])[-_ERROR_CHARS:]
        tags.update({key: str(value)[-_ERROR_CHARS:] for key, value in outcome.get("tags", {}).items()})
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


def log_alignment_reports(execution: Execution, datasets: list[str]) -> list[str]:
    """Attach each multimodal dataset's alignment report to the execution's parent run.

    Saved as the artifact `datasets/NAME.alignment.json` (one per base dataset, however many of its
    modality combinations the suite runs); returns the artifact paths logged.
    """
    client = store.client()
    logged = []
    for base in sorted({split_name(name)[0] for name in datasets}):
        try:
            spec = load_dataset_spec(base)
        except UserError:
            continue
        report = alignment_report_path(spec)
        if spec.modality == "multimodal" and report.is_file():
            with _write_lock:
                client.log_artifact(execution.execution_id, str(report), artifact_path="datasets")
            logged.append(f"datasets/{report.name}")
    return logged


def _job_metrics(result: JobResult) -> dict[str, float]:
    figures: dict[str, Any] = {**result.scores, **result.costs}
    for name, outcome in result.evaluations.items():
        figures.update(outcome.get("metrics", {}))
        if outcome.get("wall_s"):
            figures[evaluation_wall_metric(name)] = outcome["wall_s"]
    # No fake zeros: a figure that was not measured is simply absent from the run.
    return {name: float(value) for name, value in figures.items()
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}


def _log_batches(run_id: str, metrics: dict[str, float], params: dict[str, str],
                 tags: dict[str, str]) -> None:
    client = store.client()
    now = int(time.time() * 1000)
    metric_items = [Metric(k, v, now, 0) for k, v in metrics.items()]
    param_items = [Param(k, v) for k, v in params.items()]
    tag_items = [RunTag(k, v) for k, v in tags.items()]
    rounds = max(1, math.ceil(max(len(param_items), len(tag_items)) / _BATCH))
    for index in range(rounds):
        window = slice(index * _BATCH, (index + 1) * _BATCH)
        client.log_batch(run_id, metrics=metric_items if index == 0 else [],
                         params=param_items[window], tags=tag_items[window])


def _series_steps(job_dir: Path) -> list[Metric]:
    """The job's time series as step metrics (a few points each, for MLflow's charts)."""
    import pandas as pd

    now, steps = int(time.time() * 1000), []
    for name, step_of in ((SERIES_FILE, lambda row: int(1000 * row[SERIES_TIME])),
                          (TRAINING_CURVE_FILE, lambda row: int(row["step"]))):
        path = job_dir / name
        if not path.is_file():
            continue
        frame = pd.read_csv(path)
        frame = frame.iloc[:: max(1, math.ceil(len(frame) / SERIES_STEPS))]
        for column in frame.columns:
            metric = column if column in SERIES_METRICS else f"series_{column}"
            if metric not in SERIES_METRICS:
                continue
            steps += [Metric(metric, float(row[column]), now, step_of(row))
                      for row in frame.to_dict("records") if math.isfinite(row[column])]
    return steps


def _log_series(run_id: str, job_dir: Path) -> None:
    """resources.csv and training_curve.csv as artifacts (what `compare` aligns), and as step metrics."""
    client = store.client()
    for name in (SERIES_FILE, TRAINING_CURVE_FILE):
        if (job_dir / name).is_file():
            client.log_artifact(run_id, str(job_dir / name))
    steps = _series_steps(job_dir)
    for start in range(0, len(steps), 1000):  # MLflow's limit of metrics per log_batch call
        client.log_batch(run_id, metrics=steps[start : start + 1000])


def log_job(execution: Execution, job: Job, result: JobResult, job_dir: Path, *,
            problem_type: str, metric: str) -> LoggedJob:
    """Record one job as a child run of its execution, once.

    A job key already recorded as finished in this execution is not recorded again; an earlier
    failed record of the same key is replaced (deleted) by this one, so retries never duplicate.
    """
    started = time.perf_counter()
    client = store.client()
    execution = resolve_execution(execution)
    with _write_lock:
        earlier = _runs_of_job(execution.execution_id, execution.experiment_id, job.key)
        for run in earlier:
            if run.data.tags.get("status") in FINISHED_STATUSES:
                _mark_logged(job_dir, run.info.run_id)
                return LoggedJob(run.info.run_id, time.perf_counter() - started, already_recorded=True)
        # The job's own start and end, so MLflow's Duration is the job's, not the logging's.
        started_ms, ended_ms = unix_ms(result.started_utc), unix_ms(result.ended_utc)
        if started_ms is not None and ended_ms is not None and ended_ms < started_ms:
            ended_ms = started_ms
        run = client.create_run(execution.experiment_id, run_name=job_run_name(job), start_time=started_ms,
                                tags={"execution_id": execution.execution_id})
        run_id = run.info.run_id
        try:
            # The model goes first: logged after the metrics, MLflow would read each metric's
            # history back to link it to the model (a request per metric).
            model_dir = job_dir / MODEL_DIR
            if result.status == "ok" and model_dir.is_dir():
                _log_pyfunc(run_id, execution.experiment_id, job, result, job_dir)
            metrics = {**_alignment_metrics(job.dataset), **_job_metrics(result)}
            _log_batches(run_id, metrics, _job_params(job),
                         _job_tags(execution, job, result, problem_type, metric))
            data_input = dataset_input(job.dataset, job.data_version, job.fold)
            if data_input is not None:
                client.log_inputs(run_id, datasets=[data_input])
            predictions = job_dir / PREDICTIONS_FILE
            if predictions.is_file():
                client.log_artifact(run_id, str(predictions))
            _log_evaluation_files(run_id, job_dir, result)
            _log_series(run_id, job_dir)
        except BaseException:
            # Half a record must not count as a record: drop it so the job can be logged again.
            client.delete_run(run_id)
            raise
        client.set_terminated(run_id, status="FINISHED" if result.status in FINISHED_STATUSES else "FAILED",
                              end_time=ended_ms)
        for run in earlier:
            client.delete_run(run.info.run_id)
        _mark_logged(job_dir, run_id)
    return LoggedJob(run_id, time.perf_counter() - started)


def _log_evaluation_files(run_id: str, job_dir: Path, result: JobResult) -> None:
    """Each evaluation's result.json and the files it lists, under `evaluations/NAME/` on the run."""
    from tasks.evaluations.stage import evaluation_folder

    client = store.client()
    for name, outcome in sorted(result.evaluations.items()):
        folder = evaluation_folder(job_dir, name)
        for relative in ["result.json", *outcome.get("files", [])]:
            path = (folder / relative).resolve()
            if path.is_file() and path.is_relative_to(folder.resolve()):
                parent = Path(relative).parent
                where = f"evaluations/{name}" + (f"/{parent.as_posix()}" if str(parent) != "." else "")
                client.log_artifact(run_id, str(path), artifact_path=where)


def _log_pyfunc(run_id: str, experiment_id: str, job: Job, result: JobResult, job_dir: Path) -> None:
    """The job's model as a pyfunc model of its run, with the signature and input example the
    worker's test rows give (so MLflow shows its schema and serving checks its input)."""
    from tasks.tracking.pyfunc import AdapterPyfunc, model_code_paths, requirements, signature_and_example

    mlflow.set_tracking_uri(store.tracking_uri())
    # Its advice (models-from-code, signatures) is for hand-written models, not for this wrapper.
    logging.getLogger("mlflow.pyfunc").setLevel(logging.ERROR)
    signature, example = signature_and_example(job_dir / INPUT_EXAMPLE_FILE, job_dir / PREDICTIONS_FILE)

    def log_model(signature: Any, example: Any) -> None:
        # The logged model made here and Model.log given its id, not pyfunc.log_model inside
        # start_run: no active run to start and end (requests and a printed link per job), no
        # thread-local state.
        logged_model = store.client().create_logged_model(
            experiment_id, name=PYFUNC_NAME, source_run_id=run_id, params=_job_params(job))
        mlflow.models.Model.log(
            flavor=_PyfuncFlavor,
            flavor_name="pyfunc.CustomPythonModel",
            run_id=run_id,
            model_id=logged_model.model_id,
            artifact_path=None,
            name=PYFUNC_NAME,
            python_model=AdapterPyfunc(),
            artifacts={"model_dir": str(job_dir / MODEL_DIR)},
            signature=signature,
            input_example=example,
            code_paths=model_code_paths(),  # self-contained: served from any directory
            # Given, not inferred: inference loads the model in a subprocess, seconds per job.
            pip_requirements=requirements(job.framework, result.framework_version, job_dir / MODEL_DIR),
            # Model.log would otherwise load the model here to predict the example (an H2O model
            # would start a JVM in the harness).
            validate_serving_input=False,
        )

    try:
        log_model(signature, example)
    except mlflow.exceptions.MlflowException as exc:
        if signature is None:
            raise
        # An example MLflow cannot hold to its own schema must not cost the job its record.
        logger.warning("%s: model logged without a signature (%s)", job.label, str(exc).splitlines()[0])
        log_model(None, None)


class _PyfuncFlavor:
    """mlflow.pyfunc as Model.log's flavor, taking the `validate_serving_input` switch that
    Model.log reads and passes on to the flavor's save_model, which does not take it."""

    __name__ = "mlflow.pyfunc"

    @staticmethod
    def save_model(path: str, mlflow_model: Any, validate_serving_input: bool = True,
                   **kwargs: Any) -> None:
        mlflow.pyfunc.save_model(path=path, mlflow_model=mlflow_model, **kwargs)


# ---------------------------------------------------------------- job folders: pending -> logged


def write_pending(job_dir: Path, execution: Execution, job: Job, *, problem_type: str, metric: str) -> None:
    """Before the job runs: enough to log its folder later even if this process dies."""
    job_dir.mkdir(parents=True, exist_ok=True)
    record = {
        "execution": execution.__dict__,
        "job": job.to_dict(),
        "problem_type": problem_type,
        "metric": metric,
        "result_final": False,
        "run_id": None,
    }
    _write_json(job_dir / TRACKING_FILE, record)


def mark_result_final(job_dir: Path) -> None:
    """After the harness scored and saved the result: from now on the folder can be logged as it is.

    (The worker writes a first result.json itself; only the harness's final one may be recorded.)
    """
    _update_record(job_dir, result_final=True, finished_at=time.time())


def _mark_logged(job_dir: Path, run_id: str) -> None:
    _update_record(job_dir, run_id=run_id, waiting=None)


def mark_waiting(job_dir: Path, reason: str) -> None:
    """The result stays on disk for now: `tracking.json` says why, and `automl-eval sync` logs it."""
    _update_record(job_dir, waiting=reason)


def waiting_reason(job_dir: Path) -> str:
    """Why a pending job folder was not logged yet ("" when no attempt failed)."""
    try:
        return str(json.loads((job_dir / TRACKING_FILE).read_text()).get("waiting") or "")
    except (OSError, json.JSONDecodeError):
        return ""


def _update_record(job_dir: Path, **fields: Any) -> None:
    path = job_dir / TRACKING_FILE
    if path.is_file():
        record = json.loads(path.read_text())
        record.update(fields)
        _write_json(path, record)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


def pending_job_dirs(root: Path | None = None) -> list[Path]:
    """Job folders whose job finished (final result.json) but whose record was never logged.

    A folder whose job was cut short (the process running it died) is not pending: the job did not
    finish, so the next run of its execution runs it again.
    """
    root = root or paths.runs_dir()
    pending: list[tuple[float, Path]] = []
    for record_path in sorted(root.glob(f"**/{TRACKING_FILE}")):
        job_dir = record_path.parent
        try:
            record = json.loads(record_path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if record.get("result_final") and not record.get("run_id") and (job_dir / RESULT_FILE).is_file():
            pending.append((float(record.get("finished_at") or 0.0), job_dir))
    return [job_dir for _, job_dir in sorted(pending)]  # in the order the jobs finished


def folder_execution(job_dir: Path) -> Execution:
    """The execution a job folder belongs to, from its `tracking.json`."""
    return Execution(**json.loads((job_dir / TRACKING_FILE).read_text())["execution"])


def log_job_dir(job_dir: Path) -> LoggedJob:
    """Log one pending job folder from what it holds."""
    record = json.loads((job_dir / TRACKING_FILE).read_text())
    execution = Execution(**record["execution"])
    job = Job.from_dict(record["job"])
    result = JobResult.load(job_dir)
    return log_job(execution, job, result, job_dir, problem_type=record["problem_type"],
                   metric=record["metric"])


def sync_pending(root: Path | None = None) -> list[LoggedJob]:
    """Log every finished but unlogged job folder (e.g. the tracking server was down), then end
    the executions whose end waited for them."""
    from tasks.tracking.suite_lock import running_elsewhere

    # A suite another process is running now logs its own folders (two writers would race).
    pending = [job_dir for job_dir in pending_job_dirs(root) if not running_elsewhere(job_dir.parent.name)]
    logged = [log_job_dir(job_dir) for job_dir in pending]
    apply_deferred_finishes()
    return logged
