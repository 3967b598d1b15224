"""The harness's scores: every metric of a problem type, computed from predictions and the truth.

Adapters never score themselves; the parent process calls ``score`` (or, for forecasts,
``score_forecasts``) on what the child wrote to predictions.csv, so every framework is measured by
the same code. Names come from
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


# ------------------------------------------------------------------------ forecasting (M4's definitions)

# The quantiles a forecasting framework is asked for (columns `q0.1`, ... of predictions.csv);
# coverage is the share of truths inside the outermost pair (10%..90%: nominal 0.8).
QUANTILE_LEVELS: tuple[float, ...] = (0.1, 0.5, 0.9)


def quantile_column(level: float) -> str:
    return f"q{level:g}"


def smape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """M4's sMAPE of one series, in percent: 200/h * sum |y - f| / (|y| + |f|).

    A step where both are 0 is a perfect forecast (0), not 0/0."""
    denominator = np.abs(actual) + np.abs(forecast)
    terms = np.divide(np.abs(actual - forecast), denominator, out=np.zeros(len(actual)),
                      where=denominator > 0)
    return float(200.0 * terms.mean())


def mase_scale(history: np.ndarray, season_length: int) -> float:
    """The in-sample seasonal naive error, mean |y_t - y_{t-m}| over the training part (M4's MASE scale);
    a series shorter than one season plus one step falls back to m = 1."""
    m = season_length if len(history) > season_length else 1
    return float(np.mean(np.abs(history[m:] - history[:-m]))) if len(history) > m else float("nan")


def mase(actual: np.ndarray, forecast: np.ndarray, history: np.ndarray, season_length: int) -> float:
    """M4's MASE of one series: mean |y - f| over the horizon / the in-sample seasonal naive error."""
    return float(np.mean(np.abs(actual - forecast)) / mase_scale(history, season_length))


def _mean_over_series(values: list[float], what: str) -> float:
    finite = np.asarray(values, dtype=float)
    if not np.isfinite(finite).all():
        raise ValueError(f"{what} is not finite for {int((~np.isfinite(finite)).sum())} series "
                         "(a constant training part gives MASE no scale)")
    return float(finite.mean())


def quantile_scores(actual: np.ndarray, quantiles: pd.DataFrame) -> dict[str, float]:
    """Weighted quantile loss (GluonTS/AutoGluon's WQL: 2 * pinball loss summed over the points,
    over sum |y|, averaged over the levels) and the coverage of the outermost quantile interval."""
    levels = sorted(float(column[1:]) for column in quantiles.columns)
    scale = float(np.sum(np.abs(actual)))
    losses = []
    for level in levels:
        predicted = quantiles[quantile_column(level)].to_numpy(dtype=float)
        error = actual - predicted
        losses.append(2 * np.sum(np.maximum(level * error, (level - 1) * error)) / scale)
    scores = {"quantile_loss": float(np.mean(losses))}
    if len(levels) >= 2:
        low = quantiles[quantile_column(levels[0])].to_numpy(dtype=float)
        high = quantiles[quantile_column(levels[-1])].to_numpy(dtype=float)
        scores["coverage"] = float(np.mean((actual >= low) & (actual <= high)))
    return scores


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

    `series`, `actual`, `forecast`, `naive2` (and `quantiles`' rows) are aligned, one entry per
    forecast point; `histories` holds each series' training values, oldest first (MASE's scale).
    """
    check_metric("forecasting", metric)
    forecast = np.asarray(forecast, dtype=float)
    if not np.isfinite(forecast).all():
        raise ValueError("forecasts contain NaN or infinite values")
    actual, naive2 = np.asarray(actual, dtype=float), np.asarray(naive2, dtype=float)
    keys = pd.Series(np.asarray(series, dtype=object))
    per_series: dict[str, list[float]] = {"smape": [], "mase": [], "smape_naive2": [], "mase_naive2": []}
    for key, positions in keys.groupby(keys, sort=False).indices.items():
        history = histories[key]
        y = actual[positions]
        per_series["smape"].append(smape(y, forecast[positions]))
        per_series["mase"].append(mase(y, forecast[positions], history, season_length))
        per_series["smape_naive2"].append(smape(y, naive2[positions]))
        per_series["mase_naive2"].append(mase(y, naive2[positions], history, season_length))
    scores = {name: _mean_over_series(values, name) for name, values in per_series.items()}
    scores["owa"] = 0.5 * (scores["smape"] / scores["smape_naive2"] + scores["mase"] / scores["mase_naive2"])
    if quantiles is not None and len(quantiles.columns):
        scores.update(quantile_scores(actual, quantiles))
    scores[RESULT] = higher_is_better(metric, scores[metric])
    return scores
