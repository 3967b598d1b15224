"""Helpers shared by adapters: which columns a model uses, categories kept stable, probability order."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.base import JobFailure, TaskInfo

LEVELS_FILE = "categories.json"


class FeatureSchema:
    """The columns a model was fitted on and each categorical column's levels.

    Kept with the model so that rows arriving later (a single row, a reloaded CSV, MLflow's pyfunc
    input) are typed exactly as at fit time: same columns, same category codes.
    """

    def __init__(self, columns: list[str], levels: dict[str, list[Any]]) -> None:
        self.columns = columns
        self.levels = levels

    @classmethod
    def learn(cls, X: pd.DataFrame, task: TaskInfo, *, keep_text: bool = False) -> FeatureSchema:
        dropped_roles = {"id", "ignore"} | (set() if keep_text else {"text"})
        columns = [c for c in X.columns if task.column_roles.get(c) not in dropped_roles]
        levels: dict[str, list[Any]] = {}
        for column in columns:
            declared = task.column_roles.get(column) == "categorical"
            if declared or isinstance(X[column].dtype, pd.CategoricalDtype):
                values = X[column].astype("category")
                levels[column] = [_plain(v) for v in values.cat.categories]
        return cls(columns, levels)

    def apply(self, X: pd.DataFrame) -> pd.DataFrame:
        """A new frame of the model's columns, typed as at fit time.

        The columns' values are shared with X, not copied: at 10 M rows a copy of the training
        data would cost the framework a third of its memory budget before it starts. It is safe
        to replace or add columns of the result (adapters do); X itself never changes.
        """
        frame = shared_columns(X, self.columns)
        for column, categories in self.levels.items():
            frame[column] = pd.Categorical(frame[column], categories=categories)
        return frame

    def save(self, model_dir: Path) -> None:
        data = {"columns": self.columns, "levels": self.levels}
        (model_dir / LEVELS_FILE).write_text(json.dumps(data, default=str))

    @classmethod
    def load(cls, model_dir: Path) -> FeatureSchema:
        data = json.loads((model_dir / LEVELS_FILE).read_text())
        return cls(data["columns"], data["levels"])


def shared_columns(X: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """A new frame of X's `columns` (and index) over the same arrays: no data is copied, and
    replacing or adding a column of it leaves X as it was."""
    return pd.DataFrame({column: X[column] for column in columns}, index=X.index, copy=False)


def code_matrix(frame: pd.DataFrame, schema: FeatureSchema) -> np.ndarray:
    """The model's columns as float32: numbers as they are, categories as their level's code (the
    schema fixes the levels, so a code means one level at fit and predict time), a missing or
    unknown level as NaN. `frame` is typed by schema.apply."""
    columns = []
    for column in schema.columns:
        if column in schema.levels:
            codes = frame[column].cat.codes.to_numpy()
            columns.append(np.where(codes < 0, np.nan, codes).astype(np.float32))
        else:
            columns.append(pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float32,
                                                                                  na_value=np.nan))
    return np.column_stack(columns) if columns else np.zeros((len(frame), 0), dtype=np.float32)


def numbers_as_float(frame: pd.DataFrame, schema: FeatureSchema) -> pd.DataFrame:
    """`frame` (typed by schema.apply) with its numeric columns as float, a missing value as NaN
    (nullable integers and Arrow numbers become plain floats); categories are left as they are."""
    for column in schema.columns:
        if column not in schema.levels and not pd.api.types.is_float_dtype(frame[column].dtype):
            frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float)
    return frame


def encoded_target(y: pd.Series, task: TaskInfo) -> tuple[list[Any], np.ndarray]:
    """The target as a booster reads it, and the labels its outputs 0..k-1 stand for.

    Classes are coded in the task's fixed order, keeping those the training fold holds (a class
    absent from it gets probability 0 through proba_frame); a regression target is a float array
    and the label list is empty."""
    if not task.is_classification:
        return [], pd.to_numeric(y).to_numpy(dtype=float)
    seen = set(y.astype(str))
    model_classes = [label for label in task.classes if str(label) in seen]
    code = {str(label): index for index, label in enumerate(model_classes)}
    return model_classes, y.astype(str).map(code).to_numpy(dtype=np.int64)


def text_as_strings(frame: pd.DataFrame, task: TaskInfo) -> pd.DataFrame:
    """Text columns (role text) as plain Python strings, a missing text as the empty string.

    For systems that build their own text features from string columns (AutoGluon's n-grams):
    a single row or a reloaded CSV must reach them typed as at fit time.
    """
    for column in frame.columns:
        if task.column_roles.get(column) == "text":
            frame[column] = frame[column].astype(object).where(frame[column].notna(), "").astype(str)
    return frame


def search_seconds(time_s: float, share: float, reserve_s: float, floor_s: float = 5.0) -> float:
    """The time to hand an AutoML system so that its fit lands inside time_s.

    Systems overrun their own limit by a share (they finish the running model) plus a fixed part
    (ensembling, refitting, writing models): give them the smaller of time_s * share and
    time_s - reserve_s, but never less than floor_s.
    """
    return max(floor_s, min(time_s * share, time_s - reserve_s))


def _plain(value: Any) -> Any:
    # numpy scalars are not JSON; their Python twins compare equal to the originals.
    return value.item() if isinstance(value, np.generic) else value


def proba_frame(matrix: np.ndarray, model_classes: Sequence[Any], task: TaskInfo) -> pd.DataFrame:
    """Probabilities as one column per TaskInfo class, in TaskInfo order.

    A class the model never saw in training (absent from its fold) gets probability 0.
    """
    matrix = np.asarray(matrix)
    if matrix.ndim != 2:
        # A framework that trained nothing answers with an empty or 0-dimensional array.
        raise JobFailure(f"the model returned class probabilities of shape {matrix.shape} instead of one row "
                         "per row asked; it most likely trained no model, so raise the budget's time")
    by_text = {str(c): i for i, c in enumerate(model_classes)}
    columns: dict[Any, np.ndarray] = {}
    for label in task.classes:
        index = by_text.get(str(label))
        columns[label] = matrix[:, index] if index is not None else np.zeros(len(matrix))
    return pd.DataFrame(columns)


def labels_from_proba(proba: pd.DataFrame) -> np.ndarray:
    """The most likely class of each row (ties go to the first class in the fixed order)."""
    return np.asarray(proba.columns, dtype=object)[proba.to_numpy().argmax(axis=1)]
