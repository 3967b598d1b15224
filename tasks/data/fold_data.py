"""One fold of a dataset as a job sees it: features and target split into train and test, plus the
TaskInfo an adapter may know. The worker fits on it; post-job evaluations score the saved model on it.

Only the card's feature columns and the target are read, and of a Parquet file only the row groups
holding the fold's rows (tasks/data/load.py); the train and test parts are the only copies made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tasks.data.folds import split
from tasks.data.load import read_parts
from tasks.forecasting.card import forecast_card
from tasks.metric_registry import QUANTILE_LEVELS
from tasks.specs import DatasetSpec
from tasks.task_info import ForecastTask, TaskInfo


@dataclass(frozen=True)
class FoldData:
    X_train: pd.DataFrame
    y_train: pd.Series
    X_test: pd.DataFrame
    y_test: pd.Series
    test_rows: np.ndarray  # row positions of the test part in the dataset's file
    task: TaskInfo


def _plain(value: Any) -> Any:
    return value.item() if hasattr(value, "item") else value


def load_fold(spec: DatasetSpec, fold: int) -> FoldData:
    """The dataset's fold `fold`, typed by the card; class labels (strings) in a fixed, sorted order."""

    train_rows, test_rows = split(spec, fold)
    if spec.problem_type == "forecasting":
        return _forecast_fold(spec, train_rows, test_rows)
    X_train, X_test = read_parts(spec, [train_rows, test_rows], columns=spec.features or None)
    y_train, y_test = X_train.pop(spec.target), X_test.pop(spec.target)
    features = list(X_train.columns)
    classes: tuple[Any, ...] = ()
    if spec.problem_type in ("binary", "multiclass"):
        classes = tuple(sorted((_plain(v) for v in y_train.cat.categories), key=str))
        # Plain labels, not a pandas 'category': frameworks differ in how they treat a category target.
        y_train, y_test = y_train.astype(object), y_test.astype(object)
    task = TaskInfo(
        problem_type=spec.problem_type,
        target=spec.target,
        metric=str(spec.metric),
        column_roles={c: r for c, r in spec.columns.items() if c in features},
        classes=classes,
        predict_rows=len(X_test),
    )
    return FoldData(X_train, y_train, X_test, y_test, np.asarray(test_rows), task)


def _forecast_fold(spec: DatasetSpec, train_rows: np.ndarray, test_rows: np.ndarray) -> FoldData:
    """A forecasting fold: X is the (series id, timestamp) of each row, y its value; the train part
    is every series' history before the fold's window, the test part the window (tasks/forecasting)."""

    card = forecast_card(spec)
    X_train, X_test = read_parts(spec, [train_rows, test_rows], columns=[card.id, card.timestamp])
    for part in (X_train, X_test):
        part[card.id] = part[card.id].astype(str)  # a key, the same text whatever the file stored
        part[card.timestamp] = pd.to_datetime(part[card.timestamp])
    y_train, y_test = X_train.pop(spec.target), X_test.pop(spec.target)
    forecast = ForecastTask(id=card.id, timestamp=card.timestamp, frequency=card.frequency,
                            horizon=card.horizon, season_length=card.season_length,
                            quantile_levels=QUANTILE_LEVELS)
    task = TaskInfo(problem_type=spec.problem_type, target=spec.target, metric=str(spec.metric),
                    column_roles={card.id: "id", card.timestamp: "id"}, forecast=forecast)
    return FoldData(X_train, y_train, X_test, y_test, np.asarray(test_rows), task)


def series_histories(fold: FoldData) -> dict[str, np.ndarray]:
    """Each series' training values, oldest first: what MASE is scaled by and Naive2 forecasts from."""
    assert fold.task.forecast is not None
    frame = fold.X_train.assign(_value=fold.y_train.to_numpy(dtype=float))
    frame = frame.sort_values([fold.task.forecast.id, fold.task.forecast.timestamp], kind="stable")
    return {str(key): group.to_numpy() for key, group in frame.groupby(fold.task.forecast.id)["_value"]}
