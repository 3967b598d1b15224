"""OpenML tasks through the `openml` client: a task's table, its target, its roles and OpenML's own splits.

The client caches everything it fetches under the project's `.openml/` (git-ignored), so only the
first build of a task contacts OpenML; every later build reads the cache, and once `datasets/` is
pinned a `dvc pull` serves the data without OpenML at all. The server is OpenML's unless
AUTOML_EVAL_OPENML_SERVER names another one (a mirror, or the tests' server on 127.0.0.1).

OpenML's split of a task is kept as the project's folds file: the test fold of every row in the
task's first repeat (AMLB runs that repeat); a holdout task's training rows get the train-only id.
A split that the one-id-per-row format cannot hold (a row tested twice, rows used by neither side)
is refused rather than approximated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks import paths
from tasks.errors import UserError

SERVER_ENV = "AUTOML_EVAL_OPENML_SERVER"
OPENML_SERVER = "https://www.openml.org/api/v1/xml"
# OpenML's error code for a task id it does not know (task/get), and for a suite (study/get).
UNKNOWN_TASK_CODE = 151
UNKNOWN_STUDY_CODE = 601
# AMLB's metric for each problem type (its `metric` defaults in resources/config.yaml).
AMLB_METRICS = {"binary": "auc", "multiclass": "logloss", "regression": "rmse"}
# OpenML feature types -> card column roles; `date` has no role a framework here reads as a date.
ROLE_OF_TYPE = {"numeric": "numeric", "nominal": "categorical", "string": "text", "date": "ignore"}
UNSPLIT = -2  # a row in no test part of the first repeat (yet): made train-only or refused below
TRAIN_ONLY = -1  # tasks/data/folds.py TRAIN_ONLY: a training row of every fold, tested in none


@dataclass(frozen=True)
class OpenMLTaskData:
    """What a card and a folds file are made from: the table as OpenML serves it, and its split."""

    task_id: int
    dataset_id: int
    dataset_name: str
    target: str
    problem_type: str  # binary | multiclass | regression
    frame: pd.DataFrame  # every column of the dataset, target included, in OpenML's row order
    roles: dict[str, str]  # column -> card role (the target left out)
    folds: np.ndarray  # test fold of each row in the first repeat; TRAIN_ONLY for training-only rows
    repeats: int
    n_folds: int
    licence: str = "unknown"
    citation: str = ""
    version: int = 1
    notes: list[str] = field(default_factory=list)

    @property
    def metric(self) -> str:
        return AMLB_METRICS[self.problem_type]


def server() -> str:
    return os.environ.get(SERVER_ENV) or OPENML_SERVER


def cache_dir() -> Path:
    return paths.project_root() / ".openml"


def _client() -> Any:
    # The client takes about 2 s to import (it pulls scikit-learn and more): only OpenML cards pay it.
    import openml

    openml.config.server = server()
    openml.config.set_root_cache_directory(cache_dir())
    # One attempt: a build that cannot reach OpenML says so at once instead of backing off for minutes.
    openml.config.connection_n_retries = 1
    openml.config.show_progress = False
    return openml


def _unreachable(what: str) -> UserError:
    return UserError(
        f"{what} is not cached and OpenML cannot be reached ({server()}): run `automl-eval datasets "
        "build` where it can, then `dvc push`."
    )


def _is_unreachable(exc: BaseException) -> bool:
    import requests  # the client's HTTP library; importing it here keeps this module's import cheap

    return isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout))


def fetch_task(task_id: int) -> OpenMLTaskData:
    """The task's data, roles and split, from the cache or (once) from OpenML; one sentence on failure."""
    openml = _client()
    try:
        task = openml.tasks.get_task(
            task_id,
            download_splits=True,
            download_data=True,
            download_qualities=False,
            download_features_meta_data=True,
        )
    except openml.exceptions.OpenMLServerException as exc:
        if exc.code == UNKNOWN_TASK_CODE:
            raise UserError(
                f"OpenML task {task_id} does not exist on {server()}; check the id "
                f"(https://www.openml.org/t/{task_id})."
            ) from None
        raise UserError(f"OpenML refused task {task_id} ({exc.message}); try again later.") from None
    except NotImplementedError as exc:  # a task type the client itself cannot build (survival, ...)
        raise UserError(
            f"OpenML task {task_id}: {exc}; this project runs classification and regression tasks only."
        ) from None
    except Exception as exc:
        if _is_unreachable(exc):
            raise _unreachable(f"task {task_id}") from None
        raise
    kinds = {
        openml.tasks.TaskType.SUPERVISED_CLASSIFICATION: "classification",
        openml.tasks.TaskType.SUPERVISED_REGRESSION: "regression",
    }
    if task.task_type_id not in kinds:
        raise UserError(
            f"OpenML task {task_id} is a {task.task_type} task; this project runs "
            "classification and regression tasks only."
        )
    dataset = task.get_dataset()
    frame = dataset.get_data(include_row_id=True, include_ignore_attribute=True)[0]
    target = str(task.target_name)
    if kinds[task.task_type_id] == "regression":
        problem_type = "regression"
    else:
        problem_type = "binary" if len(task.class_labels or []) == 2 else "multiclass"
        # Labels as text: a CSV reads them back as strings, and scikit-learn then sees one label type.
        frame[target] = frame[target].astype("string").astype(object)
    split = task.download_split()
    return OpenMLTaskData(
        task_id=task_id,
        dataset_id=int(dataset.dataset_id),
        dataset_name=str(dataset.name),
        target=target,
        problem_type=problem_type,
        frame=frame,
        roles=_roles(dataset, target),
        folds=_first_repeat_folds(task_id, split, len(frame)),
        repeats=int(split.repeats),
        n_folds=int(split.folds),
        licence=str(dataset.licence or "unknown"),
        citation=str(dataset.citation or ""),
        version=int(dataset.version),
        notes=[f"OpenML's split has {split.repeats} repeats; the folds are its first, as AMLB runs them"]
        if split.repeats > 1
        else [],
    )


def _roles(dataset: Any, target: str) -> dict[str, str]:
    """Card roles from OpenML's feature types and flags: row ids are `id`, ignored columns `ignore`."""
    ignored = dataset.ignore_attribute or []
    ignored = {ignored} if isinstance(ignored, str) else set(ignored)
    roles: dict[str, str] = {}
    for feature in dataset.features.values():
        if feature.name == target:
            continue
        if feature.name == dataset.row_id_attribute:
            roles[feature.name] = "id"
        elif feature.name in ignored:
            roles[feature.name] = "ignore"
        else:
            roles[feature.name] = ROLE_OF_TYPE.get(feature.data_type, "ignore")
    return roles


def _first_repeat_folds(task_id: int, split: Any, n_rows: int) -> np.ndarray:
    """One fold id per row from repeat 0 (sample 0), checked to be exactly OpenML's train/test parts."""
    assignment = np.full(n_rows, UNSPLIT, dtype=np.int64)
    for fold in range(split.folds):
        test = split.get(repeat=0, fold=fold, sample=0).test
        if (assignment[test] != UNSPLIT).any():
            raise UserError(
                f"OpenML task {task_id}: its split tests some rows in two folds of one "
                "repeat, which a folds file cannot hold; choose a cross-validation task."
            )
        assignment[test] = fold
    for fold in range(split.folds):
        train = split.get(repeat=0, fold=fold, sample=0).train
        expected = np.flatnonzero(assignment != fold)
        if not np.array_equal(np.sort(train), expected):
            raise UserError(
                f"OpenML task {task_id}: fold {fold} trains on other rows than all rows "
                "outside its test part (a subsampled or learning-curve split), which a "
                "folds file cannot hold; choose a cross-validation or holdout task."
            )
    assignment[assignment == UNSPLIT] = TRAIN_ONLY
    return assignment


def suite_task_ids(suite_id: int | str) -> list[int]:
    """The task ids of an OpenML benchmark suite (e.g. 271, AMLB's classification suite)."""
    openml = _client()
    try:
        suite = openml.study.get_suite(suite_id)
    except openml.exceptions.OpenMLServerException as exc:
        if exc.code == UNKNOWN_STUDY_CODE:
            raise UserError(
                f"OpenML suite {suite_id} does not exist on {server()}; check the id "
                f"(https://www.openml.org/s/{suite_id})."
            ) from None
        raise UserError(f"OpenML refused suite {suite_id} ({exc.message}); try again later.") from None
    except Exception as exc:
        if _is_unreachable(exc):
            raise _unreachable(f"suite {suite_id}") from None
        raise
    return [int(task_id) for task_id in suite.tasks or []]
