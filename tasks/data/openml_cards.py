"""Cards generated from OpenML tasks: `source: {openml_task: N}` in, a complete card out.

A user writes a stub card (specs/datasets/NAME.yaml with only `source: {openml_task: N}`, and
optionally its own description and `gate`), or a suite names `openml/t/N`, `openml/s/ID` or task
ids (tasks/specs.py; `complete_suite_cards` below). `automl-eval datasets build` then writes the
full card: the target and problem type from the task, column roles from OpenML's feature types
and ignore flags, AMLB's metric for the problem type (auc, logloss, rmse), and OpenML's split as
the folds file.
From then on the card is read like any other, and the data comes from the client's cache or DVC.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tasks import paths
from tasks.data import openml_tasks
from tasks.errors import UserError
from tasks.specs import (
    openml_card_name,
    openml_entries,
    openml_suite_file,
    openml_suite_tasks,
    read_yaml,
)

# What a stub card may hold besides its source: the user's own words and gate choices are kept.
STUB_FIELDS = frozenset({"name", "description", "source", "gate"})


def stub_task(path: Path) -> int | None:
    """The task id of a stub card (source.openml_task and no target yet), else None."""
    data = read_yaml(path)
    source = data.get("source") if isinstance(data, dict) else None
    if not isinstance(source, dict) or "openml_task" not in source or "target" in data:
        return None
    unknown = sorted(set(data) - STUB_FIELDS)
    if unknown:
        raise UserError(
            f"{path}: field '{unknown[0]}' needs the task's columns, which only the "
            "generated card has; remove it and run `automl-eval datasets build`."
        )
    task_id = source["openml_task"]
    if not isinstance(task_id, int) or isinstance(task_id, bool) or task_id <= 0:
        raise UserError(
            f"{path}: field 'source.openml_task' must be an OpenML task id (a positive "
            f"integer), not {task_id!r}."
        )
    return task_id


def card_fields(data: openml_tasks.OpenMLTaskData, name: str, stub: dict[str, Any]) -> dict[str, Any]:
    folds = f"{data.repeats}x{data.n_folds}"  # repeats x folds
    description = stub.get("description") or (
        f"OpenML task {data.task_id}: dataset {data.dataset_name} (id {data.dataset_id}, version "
        f"{data.version}), OpenML's {folds} split; "
        + "; ".join(data.notes or ["folds as OpenML splits"])
        + "."
    )
    fields: dict[str, Any] = {
        "name": name,
        "description": description,
        "source": {
            "package": "openml",
            "call": f"openml.tasks.get_task({data.task_id})",
            "loader": "openml.task",
            "openml_task": data.task_id,
            "licence": data.licence,
            "citation": data.citation,
        },
        "file": f"{name}.csv",
        "target": data.target,
        "problem_type": data.problem_type,
        "metric": data.metric,
        "rows": len(data.frame),
        "columns": data.roles,
        "folds": {"file": f"{name}.folds.csv"},
    }
    if "gate" in stub:
        fields["gate"] = stub["gate"]
    return fields


def write_card(task_id: int, name: str | None = None, stub: dict[str, Any] | None = None) -> Path:
    """Fetch the task (cache first) and write specs/datasets/NAME.yaml; returns its path."""
    name = name or openml_card_name(task_id)
    data = openml_tasks.fetch_task(task_id)
    path = paths.dataset_cards_dir() / f"{name}.yaml"
    header = (
        f"# Generated from OpenML task {task_id} by `automl-eval datasets build`; "
        "edit the gate or description, not the columns.\n"
    )
    text = header + yaml.safe_dump(card_fields(data, name, stub or {}), sort_keys=False, allow_unicode=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def complete_stub_cards(names: list[str] | None = None) -> list[str]:
    """Write the full card of every stub card (of `names`, or all); returns the completed names."""
    folder = paths.dataset_cards_dir()
    cards = [folder / f"{name}.yaml" for name in names] if names else sorted(folder.glob("*.yaml"))
    completed = []
    for path in cards:
        if not path.is_file():
            continue  # an unknown name is reported by the card loader, with the known ones
        task_id = stub_task(path)
        if task_id is not None:
            write_card(task_id, path.stem, read_yaml(path))
            completed.append(path.stem)
    return completed


def _suite_entries(path: Path) -> list[str]:
    """A suite file's `datasets` as written (bare task ids as `openml/t/N`), before any card exists."""
    try:
        data = read_yaml(path)
    except UserError:
        return []  # a malformed suite is reported when it is loaded; the build is not its place
    datasets = data.get("datasets") if isinstance(data, dict) else None
    if not isinstance(datasets, list):
        return []  # the suite loader reports it, naming the field
    return [f"openml/t/{d}" if isinstance(d, int) and not isinstance(d, bool) else str(d) for d in datasets]


def complete_suite_cards() -> list[str]:
    """Resolve the OpenML suites the project's suites name and write a card for each task lacking one.

    An OpenML suite's task list is written once to specs/openml_suites/ID.yaml (commit it): the
    suite then means the same tasks on every clone, and loads without OpenML.
    """
    written = []
    for path in sorted(paths.suites_dir().glob("*.yaml")):
        task_ids, suite_ids = openml_entries(_suite_entries(path))
        for suite_id in suite_ids:
            tasks = openml_suite_tasks(suite_id)
            if tasks is None:
                tasks = openml_tasks.suite_task_ids(suite_id)
                listing = openml_suite_file(suite_id)
                listing.parent.mkdir(parents=True, exist_ok=True)
                listing.write_text(
                    f"# OpenML suite {suite_id} as resolved by `automl-eval datasets build`; commit it.\n"
                    + yaml.safe_dump({"suite": suite_id, "tasks": tasks}, default_flow_style=None),
                    encoding="utf-8",
                )
            task_ids += [task_id for task_id in tasks if task_id not in task_ids]
        for task_id in task_ids:
            if not (paths.dataset_cards_dir() / f"{openml_card_name(task_id)}.yaml").is_file():
                written.append(write_card(task_id).stem)
    return written
