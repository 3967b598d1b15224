"""The harness's scores: every metric of a problem type, computed from predictions and the truth.

Adapters never score themselves; the parent process calls ``score`` (or, for forecasts,
``score_forecasts``) on what the child wrote to predictions.csv, so every framework is measured by
the same code. Each metric's formula is its entry in ``tasks.metric_registry``; ``result`` is the
suite metric made higher-is-better (AMLB's convention: lower-is-better metrics are negated).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tasks.metric_registry import RESULT, Forecasts, Predictions, check_metric, get_metric, metrics_for

# Probabilities are clipped before logloss so one overconfident wrong row gives a large, finite
# loss instead of infinity (sklearn's own eps for float64).
_PROBA_EPS = float(np.finfo(np.float64).eps)


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


def oriented_score(metric: str, value: float) -> float:
    """AMLB's `result`: the metric's value turned higher-is-better (negated when lower is better)."""
    return -value if get_metric(metric).lower_is_better else value


def _every_score(problem_type: str, metric: str, fold: Predictions | Forecasts) -> dict[str, float]:
    scores = {entry.name: float(value) for entry in metrics_for(problem_type)
              if (value := entry.score(fold)) is not None}
    scores[RESULT] = oriented_score(metric, scores[metric])
    return scores


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
        fold = Predictions(problem_type, np.asarray(y_true, dtype=float), predicted)
    else:
        if proba is None:
            raise ValueError(f"{problem_type} scoring needs class probabilities")
        labels = tuple(str(c) for c in classes)
        if problem_type == "binary" and len(labels) != 2:
            raise ValueError(f"binary scoring needs exactly 2 classes, got {list(labels)}")
        fold = Predictions(problem_type, _as_labels(y_true), _as_labels(y_pred),
                           _proba_matrix(proba, classes), labels)
    return _every_score(problem_type, metric, fold)


def score_forecasts(
    metric: str,
    series: Sequence[Any] | np.ndarray,
    actual: np.ndarray,
    forecast: np.ndarray,
    naive2: np.ndarray,
    histories: dict[Any, np.ndarray],
    season_length: int,
    quantiles: pd.DataFrame | None = None,
) -> dict[str, float]:
    """M4's scores of one fold: sMAPE and MASE per series, averaged over the series, for the
    framework and for Naive2 on the same points; OWA = mean(sMAPE / sMAPE_Naive2, MASE / MASE_Naive2).

    `series`, `actual`, `forecast`, `naive2` (and `quantiles`' rows, columns `q0.1`, ...) are
    aligned, one entry per forecast point; `histories` holds each series' training values, oldest
    first (MASE's scale).
    """
    check_metric("forecasting", metric)
    forecast = np.asarray(forecast, dtype=float)
    if not np.isfinite(forecast).all():
        raise ValueError("forecasts contain NaN or infinite values")
    levels = {} if quantiles is None else {float(column[1:]): quantiles[column].to_numpy(dtype=float)
                                            for column in quantiles.columns}
    fold = Forecasts(np.asarray(series, dtype=object), np.asarray(actual, dtype=float), forecast,
                     np.asarray(naive2, dtype=float), histories, season_length, levels)
    return _every_score("forecasting", metric, fold)
