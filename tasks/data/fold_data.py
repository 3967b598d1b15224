"""One fold of a dataset as a job sees it: features and target split into train and test, plus the
TaskInfo an adapter may know. The worker fits on it; post-job evaluations score the saved model on it.
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
    """The dataset's saved fold `fold`, typed by the card; class labels in a fixed (sorted) order."""
    from tasks.data.folds import split
    from tasks.data.load import load_frame

    frame = load_frame(spec)
    train_rows, test_rows = split(spec, fold)
    features = spec.features or [c for c in frame.columns if c != spec.target]
    X, y = frame[features], frame[spec.target]
    classes: tuple[Any, ...] = ()
    if spec.problem_type in ("binary", "multiclass"):
        # Plain labels, not a pandas 'category': frameworks differ in how they treat a category target.
        y = y.astype(object)
        classes = tuple(sorted((_plain(v) for v in y.dropna().unique()), key=str))
    task = TaskInfo(
        problem_type=spec.problem_type,
        target=spec.target,
        metric=str(spec.metric),
        column_roles={c: r for c, r in spec.columns.items() if c in features},
        classes=classes,
    )
    return FoldData(
        X_train=X.iloc[train_rows].reset_index(drop=True),
        y_train=y.iloc[train_rows].reset_index(drop=True),
        X_test=X.iloc[test_rows].reset_index(drop=True),
        y_test=y.iloc[test_rows].reset_index(drop=True),
        test_rows=np.asarray(test_rows),
        task=task,
    )
