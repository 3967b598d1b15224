"""The harness's scores: every metric of a problem type, computed from predictions and the truth.

Adapters never score themselves; the parent process calls ``score`` on what the child wrote to
predictions.csv, so every framework is measured by the same code. Names come from
``tasks.vocabulary`` and ``result`` is the suite metric made higher-is-better (AMLB's convention:
lower-is-better metrics are negated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn import metrics as skm

from tasks.errors import UserError
from tasks.vocabulary import LOWER_IS_BETTER, RESULT, SCORE_METRICS

# Probabilities are clipped before logloss so one overconfident wrong row gives a large, finite
# loss instead of infinity (sklearn's own eps for float64).
_PROBA_EPS = float(np.finfo(np.float64).eps)


def check_metric(problem_type: str, metric: str) -> None:
    """Raise a one-sentence UserError when `metric` does not apply to `problem_type`."""
    if problem_type not in SCORE_METRICS:
        raise UserError(
            f"unknown problem type '{problem_type}'; expected one of {', '.join(SCORE_METRICS)}."
        )
    if metric not in SCORE_METRICS[problem_type]:
        raise UserError(
            f"metric '{metric}' does not apply to {problem_type} problems; "
            f"use one of {', '.join(SCORE_METRICS[problem_type])}."
        )


def _as_labels(values: Sequence[Any] | np.ndarray | pd.Series) -> np.ndarray:
    # Labels cross a CSV file between child and parent, so 1 / "1" / 1.0-as-"1.0" must compare
    # equal the same way on both sides: compare their text.
    return np.asarray([str(v) for v in values], dtype=object)


def _proba_matrix(proba: pd.DataFrame, classes: Sequence[Any]) -> np.ndarray:
    by_text = {str(c): c for c in proba.columns}
    missing = [str(c) for c in classes if str(c) not in by_text]
    if missing:
        raise ValueError(f"probabilities lack columns for classes {missing}")
    matrix = proba[[by_text[str(c)] for c in classes]].to_numpy(dtype=float)
    matrix = np.clip(matrix, _PROBA_EPS, 1.0)
    return matrix / matrix.sum(axis=1, keepdims=True)


def _binary(
    y_true: np.ndarray, y_pred: np.ndarray, proba: np.ndarray, classes: list[str]
) -> dict[str, float]:
    positive = classes[1]  # the second class in the fixed (sorted) order, as AMLB does
    return {
        "auc": skm.roc_auc_score(y_true == positive, proba[:, 1]),
        "logloss": skm.log_loss(y_true, proba, labels=classes),
        "acc": skm.accuracy_score(y_true, y_pred),
        "balacc": skm.balanced_accuracy_score(y_true, y_pred),
        "f1": skm.f1_score(y_true, y_pred, pos_label=positive, labels=classes, zero_division=0),
    }


def _multiclass(
    y_true: np.ndarray, y_pred: np.ndarray, proba: np.ndarray, classes: list[str]
) -> dict[str, float]:
    return {
        "logloss": skm.log_loss(y_true, proba, labels=classes),
        "acc": skm.accuracy_score(y_true, y_pred),
        "balacc": skm.balanced_accuracy_score(y_true, y_pred),
        "macro_f1": skm.f1_score(y_true, y_pred, average="macro", labels=classes, zero_division=0),
    }


def _regression(y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    return {
        "rmse": skm.root_mean_squared_error(y_true, y_pred),
        "mae": skm.mean_absolute_error(y_true, y_pred),
        "r2": skm.r2_score(y_true, y_pred),
    }


def higher_is_better(metric: str, value: float) -> float:
    """AMLB's `result`: the metric itself, or its negation when lower is better."""
    return -value if metric in LOWER_IS_BETTER else value


def score(
    problem_type: str,
    metric: str,
    y_true: Sequence[Any] | np.ndarray | pd.Series,
    y_pred: Sequence[Any] | np.ndarray | pd.Series,
    proba: pd.DataFrame | None,
    classes: Sequence[Any],
) -> dict[str, float]:
    """Every metric of `problem_type` plus `result` (the suite `metric`, higher-is-better).

    Classification needs `proba` (one column per class, any label spelling) and `classes` (the
    fixed class order); regression ignores both.
    """
    check_metric(problem_type, metric)
    if len(y_true) != len(y_pred):
        raise ValueError(f"{len(y_true)} truths but {len(y_pred)} predictions")
    if problem_type == "regression":
        predicted = np.asarray(y_pred, dtype=float)
        if not np.isfinite(predicted).all():
            raise ValueError("regression predictions contain NaN or infinite values")
        raw = _regression(np.asarray(y_true, dtype=float), predicted)
    else:
        if proba is None:
            raise ValueError(f"{problem_type} scoring needs class probabilities")
        labels = [str(c) for c in classes]
        if problem_type == "binary" and len(labels) != 2:
            raise ValueError(f"binary scoring needs exactly 2 classes, got {labels}")
        matrix = _proba_matrix(proba, classes)
        scorer = _binary if problem_type == "binary" else _multiclass
        raw = scorer(_as_labels(y_true), _as_labels(y_pred), matrix, labels)
    scores = {name: float(value) for name, value in raw.items()}
    scores[RESULT] = higher_is_better(metric, scores[metric])
    return scores
