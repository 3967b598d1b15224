"""`automl-eval suites import-amlb`: an AutoML Benchmark (AMLB) benchmark file in, a suite and a budget out.

AMLB describes a benchmark as a YAML list of tasks (resources/benchmarks/*.yaml: `name` plus one of
`openml_task_id`, `openml_dataset_id` or `dataset`, optional per-task settings, and a `__defaults__`
entry) and its constraints as named mappings (resources/constraints.yaml: `folds`,
`max_runtime_seconds`, `cores`, `max_mem_size_mb`, `min_vol_size_mb`). The import maps them to the
project's nouns: an OpenML task to `openml/t/ID` (its card is written by `automl-eval datasets build`),
a local train/test pair to a card and a folds file of its own, a constraint to a budget, AMLB's
framework names to the adapters that match. Everything is checked before anything is written, and
nothing is written outside the project.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import psutil
import yaml

from tasks import paths
from tasks.data.amlb_frameworks import FRAMEWORK_NOTES, FRAMEWORKS, amlb_name
from tasks.data.folds import TRAIN_ONLY, folds_csv_bytes
from tasks.data.materialize import write_if_changed
from tasks.errors import UserError
from tasks.specs import is_plain_name, load_budgets, read_yaml

# AMLB's task keys (amlb/resources.py and resources/benchmarks/example.yaml); any other is a mistake.
TASK_KEYS = frozenset(
    {
        "name",
        "id",
        "openml_task_id",
        "openml_dataset_id",
        "dataset",
        "description",
        "enabled",
        "metric",
        "folds",
        "max_runtime_seconds",
        "cores",
        "max_mem_size_mb",
        "min_vol_size_mb",
        "ec2_instance_type",
        "ec2_volume_type",
        "quantile_levels",
    }
)
CONSTRAINT_KEYS = frozenset(
    {
        "folds",
        "max_runtime_seconds",
        "cores",
        "max_mem_size_mb",
        "min_vol_size_mb",
        "ec2_instance_type",
        "ec2_volume_type",
    }
)
# AMLB's own defaults (resources/config.yaml `benchmarks.defaults`), where neither file sets a value.
AMLB_DEFAULTS = {"folds": 10, "max_runtime_seconds": 3600, "cores": -1, "max_mem_size_mb": -1}
# AMLB framework names -> adapters: tasks/data/amlb_frameworks.py, shared with `report --reference`.


@dataclass
class AmlbImport:
    suite_path: Path
    budget: str
    datasets: list[str]
    frameworks: list[str]
    notes: list[str] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class _LocalTask:
    """An AMLB task given by local files: one train file and one test file (AMLB's fold 0)."""

    name: str
    train: Path
    test: Path
    target: str


def _tasks(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    data = read_yaml(path)
    if not isinstance(data, list) or not all(isinstance(task, dict) for task in data):
        raise UserError(
            f"{path}: an AMLB benchmark file is a YAML list of tasks (`- name: ...`), as in "
            "AMLB's resources/benchmarks/*.yaml."
        )
    defaults: dict[str, Any] = {}
    tasks = []
    for index, task in enumerate(data):
        name = task.get("name")
        where = f"{path}: task {name or index}"
        unknown = sorted(set(task) - TASK_KEYS)
        if unknown:
            raise UserError(
                f"{where} has unknown key '{unknown[0]}'; AMLB's task keys are "
                f"{', '.join(sorted(TASK_KEYS))}."
            )
        if not isinstance(name, str) or not name:
            raise UserError(f"{path}: task {index} has no `name`; give each task one.")
        if name == "__defaults__":
            defaults = task
        elif task.get("enabled", True) is not False and name != "__dummy-task":
            tasks.append(task)
    if not tasks:
        raise UserError(f"{path}: no enabled task; add one with `openml_task_id` or `dataset`.")
    return tasks, defaults


def _constraint(path: Path | None, name: str | None) -> tuple[str, dict[str, Any]]:
    if path is None:
        return "", {}
    data = read_yaml(path)
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()) or not data:
        raise UserError(
            f"{path}: an AMLB constraint file maps names to constraints (`1h8c: {{folds: 10, "
            "max_runtime_seconds: 3600, cores: 8}}`), as AMLB's resources/constraints.yaml."
        )
    if name is None:
        if len(data) != 1:
            raise UserError(
                f"{path}: holds {len(data)} constraints ({', '.join(data)}); choose one with "
                "--constraint-name."
            )
        name = next(iter(data))
    if name not in data:
        raise UserError(f"{path}: no constraint '{name}'; it has {', '.join(data)}.")
    unknown = sorted(set(data[name]) - CONSTRAINT_KEYS)
    if unknown:
        raise UserError(
            f"{path}: constraint '{name}' has unknown key '{unknown[0]}'; AMLB's constraint "
            f"keys are {', '.join(sorted(CONSTRAINT_KEYS))}."
        )
    return str(name), data[name]


def _positive_int(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{where} must be a whole number, not {value!r}.")
    return value


def _budget_fields(
    settings: dict[str, Any], where: str, notes: list[str], allow_more_cores: bool
) -> dict[str, int]:
    runtime = _positive_int(settings["max_runtime_seconds"], f"{where}: max_runtime_seconds")
    if runtime <= 0:
        raise UserError(f"{where}: max_runtime_seconds must be above 0, not {runtime}.")
    # The cores this process may use (a container's or taskset's share), as a job's affinity is cut.
    host_cores = len(os.sched_getaffinity(0))
    cores = _positive_int(settings["cores"], f"{where}: cores")
    if cores <= 0:
        cores = host_cores
        notes.append(f"cores {settings['cores']} means every core in AMLB: {cores} on this host")
    elif cores > host_cores and not allow_more_cores:
        # Jobs here would share cores, so their times would not be the constraint's: refused at
        # import (planning), not discovered in the results; team workers may have the cores.
        raise UserError(
            f"{where}: cores {cores} is more than this host's {host_cores}, so its times would not "
            "be the constraint's; import it where the cores exist, or pass --allow-more-cores for "
            "a suite that team workers with those cores will run."
        )
    elif cores > host_cores:
        notes.append(
            f"the constraint asks for {cores} cores and this host has {host_cores} (--allow-more-cores): "
            "jobs run here share cores; run it where the cores exist to compare with AMLB's numbers"
        )
    memory = _positive_int(settings["max_mem_size_mb"], f"{where}: max_mem_size_mb")
    if memory <= 0:
        memory = int(psutil.virtual_memory().total // 2**20)
        notes.append(
            f"max_mem_size_mb {settings['max_mem_size_mb']} means the host's memory in AMLB: {memory} MB here"
        )
    if settings.get("min_vol_size_mb", -1) not in (-1, None):
        notes.append("min_vol_size_mb is ignored: a budget here limits time, cores and memory, not disk")
    return {"time_s": runtime, "cores": cores, "memory_mb": memory, "gpus": 0}


def _local_task(task: dict[str, Any], benchmark: Path) -> _LocalTask:
    where = f"{benchmark}: task {task['name']}"
    dataset = task["dataset"]
    if (
        not isinstance(dataset, dict)
        or not isinstance(dataset.get("train"), str)
        or not isinstance(dataset.get("test"), str)
    ):
        raise UserError(
            f"{where}: field 'dataset' must name one train and one test file (`dataset: "
            "{train: PATH, test: PATH, target: COLUMN}`); folders and file lists are not "
            "imported, give each fold as a task of its own."
        )
    if "target" not in dataset:
        raise UserError(f"{where}: field 'dataset.target' is required here; name the target column.")
    files = []
    for part in ("train", "test"):
        text = dataset[part]
        if "{" in text:
            raise UserError(
                f"{where}: field 'dataset.{part}' uses an AMLB placeholder ({text}); give "
                "the path itself, relative to the benchmark file."
            )
        file = paths.inside_project((benchmark.parent / text), f"{where}: field 'dataset.{part}'")
        if not file.is_file() or file.suffix not in (".csv", ".parquet"):
            raise UserError(f"{where}: field 'dataset.{part}': {file} is not a CSV or Parquet file.")
        files.append(file)
    return _LocalTask(str(task["name"]), files[0], files[1], str(dataset["target"]))


def _read(path: Path) -> pd.DataFrame:
    return pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)


def _local_card(local: _LocalTask, card: str, benchmark: Path) -> tuple[dict[str, Any], pd.DataFrame, bytes]:
    """The card, table and folds of a local train/test pair: test rows are fold 0, train rows train-only."""
    train, test = _read(local.train), _read(local.test)
    where = f"{benchmark}: task {local.name}"
    if list(train.columns) != list(test.columns) or local.target not in train.columns:
        raise UserError(
            f"{where}: the train and test files must have the same columns, the target "
            f"'{local.target}' among them."
        )
    frame = pd.concat([train, test], ignore_index=True)
    folds = np.concatenate([np.full(len(train), TRAIN_ONLY), np.zeros(len(test), dtype=np.int64)])
    target = frame[local.target]
    numeric = pd.api.types.is_numeric_dtype(target)
    if numeric and target.nunique() > 10:
        problem_type = "regression"
    else:
        problem_type = "binary" if target.nunique() == 2 else "multiclass"
    columns = {
        column: "numeric" if pd.api.types.is_numeric_dtype(frame[column]) else "categorical"
        for column in frame.columns
        if column != local.target
    }
    fields = {
        "name": card,
        "description": f"AMLB task {local.name} from {benchmark.name}: {local.train.name} (train) and "
        f"{local.test.name} (test, fold 0).",
        "source": {"package": "amlb", "call": f"{benchmark.name}: {local.name}", "licence": "unknown"},
        "file": f"{card}.csv",
        "target": local.target,
        "problem_type": problem_type,
        "metric": {"binary": "auc", "multiclass": "logloss", "regression": "rmse"}[problem_type],
        "rows": len(frame),
        "columns": columns,
        "folds": {"file": f"{card}.folds.csv"},
    }
    return fields, frame, folds_csv_bytes(folds)


def _frameworks(names: list[str], notes: list[str], unavailable: Mapping[str, str]) -> list[str]:
    """The adapters AMLB's `names` map to, in order. A name with no adapter, or whose adapter cannot
    run here (`unavailable`: adapter -> why), is left out with a note. A name is found whatever its
    case, as AMLB's command line finds it (`randomforest`), and is then written as AMLB spells it."""
    names = [amlb_name(name) or name for name in names]
    unknown = [name for name in names if name not in FRAMEWORKS]
    refused = [name for name in names if name in FRAMEWORKS and FRAMEWORKS[name] in unavailable]
    known = [name for name in names if name in FRAMEWORKS and name not in refused]
    if unknown:
        notes.append(
            f"not available here: {', '.join(unknown)} (AMLB frameworks this project runs: "
            f"{', '.join(FRAMEWORKS)})"
        )
    refusals = [f"{name} is left out: it runs here as '{FRAMEWORKS[name]}', which cannot run on this machine "
                f"({unavailable[FRAMEWORKS[name]].rstrip('.')})" for name in refused]
    notes.extend(refusals)
    if not known:
        raise UserError(
            f"--framework: none of {', '.join(names)} is available here"
            f"{''.join(f'; {refusal}' for refusal in refusals)}; choose among {', '.join(FRAMEWORKS)}."
        )
    notes.extend(FRAMEWORK_NOTES[name] for name in known if name in FRAMEWORK_NOTES)
    adapters: list[str] = []
    for name in known:
        if FRAMEWORKS[name] not in adapters:
            adapters.append(FRAMEWORKS[name])
    return adapters


def import_benchmark(
    benchmark: Path,
    *,
    constraint: Path | None = None,
    constraint_name: str | None = None,
    frameworks: list[str],
    name: str | None = None,
    allow_more_cores: bool = False,
    unavailable: Mapping[str, str] | None = None,
) -> AmlbImport:
    """Check the AMLB files, then write the suite, its budget and any local task's card and data.

    `unavailable` says, per adapter, why it cannot run here (the framework registry's answer, which
    the caller asks: data does not import the frameworks); AMLB names that map to one are left out."""
    suite_name = name or benchmark.stem.replace(".", "_")
    if not is_plain_name(suite_name):
        raise UserError(f"--name: {suite_name!r} is not a plain name; use letters, digits, '_' and '-'.")
    tasks, defaults = _tasks(benchmark)
    constraint_label, constrained = _constraint(constraint, constraint_name)
    notes: list[str] = []
    settings = {**AMLB_DEFAULTS, **{k: v for k, v in defaults.items() if k in AMLB_DEFAULTS}, **constrained}
    where = f"{constraint}: constraint '{constraint_label}'" if constraint else f"{benchmark}: __defaults__"
    budget_fields = _budget_fields(settings, where, notes, allow_more_cores)
    folds = _positive_int(settings["folds"], f"{where}: folds")
    budget_name = f"amlb_{constraint_label or suite_name}".replace(".", "_")
    adapters = _frameworks(frameworks, notes, unavailable or {})

    datasets: list[str] = []
    local_cards: list[tuple[dict[str, Any], pd.DataFrame, bytes]] = []
    for task in tasks:
        overridden = sorted(k for k in AMLB_DEFAULTS if k in task)
        if overridden:
            notes.append(
                f"task {task['name']}: its own {', '.join(overridden)} are not kept (a suite has "
                "one budget and one fold count)"
            )
        if "openml_task_id" in task:
            task_id = task["openml_task_id"]
            if not isinstance(task_id, int) or isinstance(task_id, bool) or task_id <= 0:
                raise UserError(
                    f"{benchmark}: task {task['name']}: openml_task_id must be a task id, not {task_id!r}."
                )
            datasets.append(f"openml/t/{task_id}")
        elif "dataset" in task:
            local = _local_task(task, benchmark)
            card = f"amlb_{suite_name}_{local.name}".replace(".", "_")
            if not is_plain_name(card):
                raise UserError(
                    f"{benchmark}: task name {local.name!r} is not a plain name; use letters, "
                    "digits, '_' and '-'."
                )
            local_cards.append(_local_card(local, card, benchmark))
            datasets.append(card)
            if folds > 1:
                notes.append(f"task {local.name} is one train/test pair, so fold 0 only: its jobs for "
                             f"folds 1..{folds - 1} fail (give each fold's pair as a task of its own)")
        elif "openml_dataset_id" in task:
            raise UserError(
                f"{benchmark}: task {task['name']} names OpenML dataset "
                f"{task['openml_dataset_id']}, which has no fixed split; give its OpenML task "
                "(openml_task_id) instead."
            )
        else:
            raise UserError(f"{benchmark}: task {task['name']} has none of openml_task_id, dataset; add one.")

    suite_path = paths.suites_dir() / f"{suite_name}.yaml"
    budgets = load_budgets()
    if budget_name in budgets and budgets[budget_name].model_dump(exclude={"name"}) != budget_fields:
        raise UserError(
            f"{paths.budgets_file()}: budget '{budget_name}' exists with other limits; remove it "
            "or import under another constraint name."
        )
    suite = {
        "description": f"AMLB benchmark {benchmark.name}"
        + (f" under constraint {constraint_label}" if constraint_label else "")
        + " (imported by `automl-eval suites import-amlb`).",
        "datasets": datasets,
        "frameworks": adapters,
        "folds": folds,
        "seeds": [0],
        "budget": budget_name,
    }
    header = "".join(f"# note: {note}\n" for note in notes)
    text = f"# Imported from the AMLB benchmark {benchmark.name}.\n{header}" + yaml.safe_dump(
        suite, sort_keys=False
    )
    if suite_path.is_file() and suite_path.read_text(encoding="utf-8") != text:
        raise UserError(f"{suite_path}: exists already; remove it or give --name.")

    # Everything checked: now write.
    result = AmlbImport(suite_path, budget_name, datasets, adapters, notes)
    for fields, frame, folds_bytes in local_cards:
        card_path = paths.dataset_cards_dir() / f"{fields['name']}.yaml"
        card_path.write_text(yaml.safe_dump(fields, sort_keys=False), encoding="utf-8")
        data_path = paths.datasets_dir() / fields["file"]
        write_if_changed(data_path, frame.to_csv(index=False, lineterminator="\n").encode("utf-8"))
        write_if_changed(paths.datasets_dir() / fields["folds"]["file"], folds_bytes)
        result.written += [card_path, data_path]
    if budget_name not in budgets:
        with paths.budgets_file().open("a", encoding="utf-8") as handle:
            limits = ", ".join(f"{key}: {value}" for key, value in budget_fields.items())
            handle.write(f"{budget_name}: {{{limits}}}  # AMLB constraint, imported with {suite_name}\n")
        result.written.append(paths.budgets_file())
    suite_path.parent.mkdir(parents=True, exist_ok=True)
    suite_path.write_text(text, encoding="utf-8")
    result.written.append(suite_path)
    return result
