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

from tasks.frameworks.base import TaskInfo
from tasks.specs import DatasetSpec


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
    from tasks.data.folds import split
    from tasks.data.load import read_parts

    train_rows, test_rows = split(spec, fold)
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
    )
    return FoldData(X_train, y_train, X_test, y_test, np.asarray(test_rows), task)
