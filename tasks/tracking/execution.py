"""The execution lifecycle: one experiment per suite, a parent run per execution of it.

An execution starts (or, while the store is unreachable, starts on disk and gets its parent run
when the store answers), is resumed, and ends finished or unfinished; an end the store could not
take is kept on disk and applied by `sync`. Its params are the selection a resume re-plans from.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from mlflow.entities import Metric, Param, RunTag

from tasks import paths
from tasks.errors import UserError
from tasks.modalities.base import modality_of
from tasks.multimodal.combinations import split_name
from tasks.specs import FrameworkRef, load_dataset_spec
from tasks.tracking import store
from tasks.vocabulary import EXECUTION_METRICS, RETRYABLE_STATUSES

OFFLINE_PREFIX = "offline-"  # an execution started while the store was unreachable
MAX_TAG_CHARS = 4000  # the tail of a long text (an error, a reason) kept in a tag


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


def experiment_name(suite: str) -> str:
    """The MLflow experiment of a suite: its name, so every team finds it under the same name."""
    return suite


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
    try:
        return metadata.version("automl-eval")
    except metadata.PackageNotFoundError:
        return "unknown"


# ---------------------------------------------------------------- start, resume, finish


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
    execution = Execution(suite, f"{OFFLINE_PREFIX}{uuid.uuid4().hex}", "", team)
    path = _executions_dir() / f"{execution.execution_id}.start.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"suite": suite, "team": team, "selection": selection or {}, "budget": budget,
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
            write_json(path, record)
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
    return "best." + re.sub(r"[^A-Za-z0-9_\-. :/]", "_", dataset)


def finish_execution(execution: Execution, *, summary_markdown: str = "",
                     data_gate_failures: dict[str, str] | None = None,
                     data_gate_accepted: dict[str, str] | None = None,
                     counts: dict[str, int] | None = None, best: dict[str, str] | None = None) -> None:
    """Close the parent run. `counts` (jobs by status) become its `jobs*` metrics and `best`
    (dataset -> framework with the best mean result) its `best.DATASET` tags, so the experiment's
    runs table shows each execution's outcome without opening it."""
    client = store.client()
    with store.write_lock:
        tags = [RunTag(best_tag(dataset), framework) for dataset, framework in sorted((best or {}).items())]
        metrics = [Metric(name, float(value), int(time.time() * 1000), 0)
                   for name, value in execution_metrics(counts).items()] if counts is not None else []
        if tags or metrics:
            client.log_batch(execution.execution_id, metrics=metrics, tags=tags)
        gate_tags = {"data_gate_failures": data_gate_failures, "data_gate_accepted": data_gate_accepted}
        for tag, gates in gate_tags.items():
            if gates:
                text = "; ".join(f"{name}: {why}" for name, why in sorted(gates.items()))
                client.set_tag(execution.execution_id, tag, text[-MAX_TAG_CHARS:])
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
    write_json(path, record)


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


def log_alignment_reports(execution: Execution, datasets: list[str]) -> list[str]:
    """Attach each dataset's modality files to the execution's parent run: a multimodal dataset's
    alignment report, as its plug-in names it (tasks/modalities/multimodal.py).

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
        for artifact in modality_of(spec).run_artifacts(spec):
            with store.write_lock:
                client.log_artifact(execution.execution_id, str(artifact), artifact_path="datasets")
            logged.append(f"datasets/{artifact.name}")
    return logged


def write_json(path: Path, data: dict[str, Any]) -> None:
    """Atomically: a reader (or a process that dies half-way) never sees half a record."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)
