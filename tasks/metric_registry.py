"""The metric registry: everything the project knows about a metric, in one entry of METRICS.

An entry gives the metric's name (its MLflow name), the problem types it is scored for, its
direction, the function the harness scores it with (tasks/metrics.py calls it on every job's
predictions, so every framework is measured by the same code), and the name each AutoML framework
uses for it where that framework can optimise it. The vocabulary, each problem type's default
metric, the card check, compare's directions, the vocabulary page, the synthetic runs and
the adapters' metric names all derive from here: adding a metric is one entry.

Layer 1 (nouns): it imports nothing of the project's, so data and specs may read it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, cached_property
from types import ModuleType
from typing import Any

import numpy as np

from tasks.errors import UserError

PROBLEM_TYPES: tuple[str, ...] = ("binary", "multiclass", "regression", "forecasting")
CLASSIFICATION = ("binary", "multiclass")
RESULT = "result"  # the suite metric made higher-is-better (AMLB: negated when lower is better)

# The frameworks that are told the suite metric in their own names: AutoGluon's `eval_metric`,
# H2O AutoML's `sort_metric`, FLAML's `metric`. An adapter names the one whose names it uses.
AUTOGLUON, H2O, FLAML = "autogluon", "h2o", "flaml"
METRIC_FRAMEWORKS: tuple[str, ...] = (AUTOGLUON, H2O, FLAML)

# The quantiles a forecasting framework is asked for (columns `q0.1`, ... of predictions.csv);
# coverage is the share of truths inside the outermost pair (10%..90%: nominal 0.8).
QUANTILE_LEVELS: tuple[float, ...] = (0.1, 0.5, 0.9)
# top5_acc: the true class among the TOP_K most probable (image classification's usual second figure).
TOP_K = 5
# Expected calibration error: equal-width bins of the top-class probability over [0, 1].
ECE_BINS = 15


def quantile_column(level: float) -> str:
    return f"q{level:g}"


@cache
def _sklearn_metrics() -> ModuleType:
    # sklearn.metrics takes about 2 s to import, and every command reads the vocabulary (which
    # derives from this module): only scoring pays for it.
    from sklearn import metrics

    return metrics


# ------------------------------------------------------------------ what one fold is scored on


@dataclass(frozen=True)
class Predictions:
    """One classification or regression fold as the harness scores it."""

    problem_type: str
    y_true: np.ndarray  # class labels as text (classification) or floats (regression)
    y_pred: np.ndarray
    # rows x classes in `classes` order, clipped at machine epsilon and renormalised (classification)
    proba: np.ndarray | None = None
    classes: tuple[str, ...] = ()  # the fixed (sorted) class order; the positive class is the second

    @property
    def matrix(self) -> np.ndarray:
        if self.proba is None:
            raise ValueError(f"{self.problem_type} scoring needs class probabilities")
        return self.proba


@dataclass(frozen=True)
class Forecasts:
    """One forecasting fold: `series`, `actual`, `forecast`, `naive2` and each quantile's values are
    aligned, one entry per forecast point; `histories` holds each series' training values, oldest
    first (MASE's scale)."""

    series: np.ndarray
    actual: np.ndarray
    forecast: np.ndarray
    naive2: np.ndarray
    histories: Mapping[Any, np.ndarray]
    season_length: int
    quantiles: Mapping[float, np.ndarray] = field(default_factory=dict)  # level -> values

    @cached_property
    def _groups(self) -> list[tuple[Any, np.ndarray]]:
        # Each series' positions, series in order of first appearance (the order the means add up in).
        keys, first, inverse = np.unique(self.series, return_index=True, return_inverse=True)
        return [(keys[group], np.flatnonzero(inverse == group)) for group in np.argsort(first, kind="stable")]

    def mean_over_series(
        self, name: str, error: Callable[[np.ndarray, np.ndarray, np.ndarray], float]
    ) -> float:
        """`error(truth, prediction positions, history)` per series, averaged over the series."""
        values = np.asarray([error(self.actual[positions], positions, np.asarray(self.histories[key]))
                             for key, positions in self._groups], dtype=float)
        if not np.isfinite(values).all():
            raise ValueError(f"{name} is not finite for {int((~np.isfinite(values)).sum())} series "
                             "(a constant training part gives MASE no scale)")
        return float(values.mean())


# ------------------------------------------------------------------------------------ entries


@dataclass(frozen=True)
class Metric:
    """One metric: what it is called, where it applies, which way is better, how it is computed."""

    name: str
    problem_types: tuple[str, ...]
    lower_is_better: bool
    # Predictions (classification, regression) or Forecasts -> the value; None where the fold lacks
    # what the metric needs (a forecast without quantiles has no quantile_loss).
    score: Callable[[Any], float | None]
    # The name each framework of METRIC_FRAMEWORKS uses for it, where that framework can optimise it.
    framework_names: Mapping[str, str] = field(default_factory=dict)
    default_for: tuple[str, ...] = ()  # problem types whose cards take this metric unless they name one
    definition: str = ""  # for the vocabulary table, where the formula is not the textbook one

    @property
    def direction(self) -> str:
        return "lower is better" if self.lower_is_better else "higher is better"


def _positive(p: Predictions) -> str:
    return p.classes[1]  # the second class in the fixed (sorted) order, as AMLB does


def _one_hot(p: Predictions) -> np.ndarray:
    return (p.y_true[:, None] == np.asarray(p.classes, dtype=object)[None, :]).astype(float)


def _top5(p: Predictions) -> float | None:
    """The share of rows whose true class is among the 5 most probable; None with 5 classes or
    fewer (every row would count)."""
    if len(p.classes) <= TOP_K:
        return None
    top = np.argsort(-p.matrix, axis=1, kind="stable")[:, :TOP_K]
    return float(np.mean((np.asarray(p.classes, dtype=object)[top] == p.y_true[:, None]).any(axis=1)))


def _brier(p: Predictions) -> float:
    truth, proba = _one_hot(p), p.matrix
    if p.problem_type == "binary":
        return float(np.mean((truth[:, 1] - proba[:, 1]) ** 2))
    return float(np.mean(np.sum((truth - proba) ** 2, axis=1)))


def _ece(p: Predictions) -> float:
    proba = p.matrix
    confidence = proba.max(axis=1)
    correct = np.asarray(p.classes, dtype=object)[proba.argmax(axis=1)] == p.y_true
    # Bin b holds confidences in (b/15, (b+1)/15]; the top-class probability is never 0.
    bins = np.digitize(confidence, np.linspace(0.0, 1.0, ECE_BINS + 1)[1:-1], right=True)
    return float(sum(np.mean(bins == b) * abs(correct[bins == b].mean() - confidence[bins == b].mean())
                     for b in np.unique(bins)))


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


def _smape_of(f: Forecasts, values: np.ndarray, name: str) -> float:
    return f.mean_over_series(name, lambda y, positions, _history: smape(y, values[positions]))


def _mase_of(f: Forecasts, values: np.ndarray, name: str) -> float:
    return f.mean_over_series(
        name, lambda y, positions, history: mase(y, values[positions], history, f.season_length))


def _owa(f: Forecasts) -> float:
    """M4's overall weighted average: mean(sMAPE / sMAPE_Naive2, MASE / MASE_Naive2)."""
    return 0.5 * (_smape_of(f, f.forecast, "smape") / _smape_of(f, f.naive2, "smape_naive2")
                  + _mase_of(f, f.forecast, "mase") / _mase_of(f, f.naive2, "mase_naive2"))


def _quantile_loss(f: Forecasts) -> float | None:
    """GluonTS/AutoGluon's weighted quantile loss: 2 * pinball loss summed over the points, over
    sum |y|, averaged over the levels."""
    if not f.quantiles:
        return None
    scale = float(np.sum(np.abs(f.actual)))
    losses = []
    for level in sorted(f.quantiles):
        error = f.actual - f.quantiles[level]
        losses.append(2 * np.sum(np.maximum(level * error, (level - 1) * error)) / scale)
    return float(np.mean(losses))


def _coverage(f: Forecasts) -> float | None:
    """The share of truths inside the outermost quantile interval."""
    if len(f.quantiles) < 2:
        return None
    levels = sorted(f.quantiles)
    return float(np.mean((f.actual >= f.quantiles[levels[0]]) & (f.actual <= f.quantiles[levels[-1]])))


def _names(autogluon: str, h2o: str, flaml: str) -> dict[str, str]:
    return {AUTOGLUON: autogluon, H2O: h2o, FLAML: flaml}


# The list's order is the order of the scores in the vocabulary and its table. Where a framework has
# no such metric its name is the nearest it has (FLAML's accuracy for balanced accuracy, H2O's
# logloss for accuracy and F1, H2O's RMSE for R2); where it has nothing near, it has none, and a
# suite that asks it to optimise the metric is refused when the run is planned.
METRICS: tuple[Metric, ...] = (
    Metric("auc", ("binary",), False,
           lambda p: _sklearn_metrics().roc_auc_score(p.y_true == _positive(p), p.matrix[:, 1]),
           _names("roc_auc", "AUC", "roc_auc"), default_for=("binary",)),
    Metric("logloss", CLASSIFICATION, True,
           lambda p: _sklearn_metrics().log_loss(p.y_true, p.matrix, labels=list(p.classes)),
           _names("log_loss", "logloss", "log_loss"), default_for=("multiclass",)),
    Metric("acc", CLASSIFICATION, False,
           lambda p: _sklearn_metrics().accuracy_score(p.y_true, p.y_pred),
           _names("accuracy", "logloss", "accuracy")),
    Metric("balacc", CLASSIFICATION, False,
           lambda p: _sklearn_metrics().balanced_accuracy_score(p.y_true, p.y_pred),
           _names("balanced_accuracy", "mean_per_class_error", "accuracy")),
    Metric("f1", ("binary",), False,
           lambda p: _sklearn_metrics().f1_score(p.y_true, p.y_pred, pos_label=_positive(p),
                                                 labels=list(p.classes), zero_division=0),
           _names("f1", "logloss", "f1")),
    Metric("macro_f1", ("multiclass",), False,
           lambda p: _sklearn_metrics().f1_score(p.y_true, p.y_pred, average="macro", labels=list(p.classes),
                                                 zero_division=0),
           _names("f1_macro", "logloss", "macro_f1")),
    Metric("brier", CLASSIFICATION, True, _brier,
           definition="Brier score, of the probabilities: binary, the mean over rows of "
                      "(1[positive] - p(positive))^2, the positive class being the second in sorted order "
                      "(0..1); multiclass, the mean over rows of the sum over classes of "
                      "(1[class] - p(class))^2 (0..2)"),
    Metric("ece", CLASSIFICATION, True, _ece,
           definition=f"expected calibration error: rows binned by their top-class probability into "
                      f"{ECE_BINS} equal-width bins (b/{ECE_BINS}, (b+1)/{ECE_BINS}]; the sum over bins of "
                      "the bin's share of rows times the absolute gap between its accuracy (top class = "
                      "truth) and its mean top-class probability (0..1)"),
    # Added after the others: the order of the names existing stores read stays as it was.
    Metric("top5_acc", ("multiclass",), False, _top5,
           definition=f"top-{TOP_K} accuracy: the share of rows whose true class is among the {TOP_K} "
                      f"most probable; scored only with more than {TOP_K} classes"),
    Metric("rmse", ("regression",), True,
           lambda p: _sklearn_metrics().root_mean_squared_error(p.y_true, p.y_pred),
           _names("root_mean_squared_error", "RMSE", "rmse"), default_for=("regression",)),
    Metric("mae", ("regression",), True,
           lambda p: _sklearn_metrics().mean_absolute_error(p.y_true, p.y_pred),
           _names("mean_absolute_error", "MAE", "mae")),
    Metric("r2", ("regression",), False,
           lambda p: _sklearn_metrics().r2_score(p.y_true, p.y_pred),
           _names("r2", "RMSE", "r2")),
    # M4's scores: sMAPE and MASE averaged over the series, OWA relative to Naive2 on the same fold
    # (the Naive2 figures are recorded too); quantile_loss and coverage only when the framework
    # returns quantiles.
    Metric("owa", ("forecasting",), True, _owa, default_for=("forecasting",)),
    Metric("smape", ("forecasting",), True, lambda f: _smape_of(f, f.forecast, "smape")),
    Metric("mase", ("forecasting",), True, lambda f: _mase_of(f, f.forecast, "mase")),
    Metric("smape_naive2", ("forecasting",), True, lambda f: _smape_of(f, f.naive2, "smape_naive2")),
    Metric("mase_naive2", ("forecasting",), True, lambda f: _mase_of(f, f.naive2, "mase_naive2")),
    Metric("quantile_loss", ("forecasting",), True, _quantile_loss),
    Metric("coverage", ("forecasting",), False, _coverage),
)
_BY_NAME: dict[str, Metric] = {entry.name: entry for entry in METRICS}

# Recorded figures that are not scores but are compared (tasks/report/compare.py): costs are lower
# is better unless named here (the serving stacks' serve_cold_start_s, serve_server_cpu_s_per_1k,
# serve_server_peak_rss_mb among them); these post-job evaluation figures and throughputs are higher
# is better. A serving figure of a stack other than mlflow, serve_STACK_FIGURE, has serve_FIGURE's.
HIGHER_IS_BETTER_FIGURES = frozenset({RESULT, "throughput_rows_s", "train_images_per_s", "epochs",
                                      "robust_auc", "robust_breaking_mean", "serve_max_qps_at_slo",
                                      "serve_loadgen_valid_qps"})
SERVING_PREFIX = "serve_"


# ------------------------------------------------------------------------------------ queries


def get_metric(name: str) -> Metric:
    if name not in _BY_NAME:
        raise UserError(f"unknown metric '{name}'; known metrics: {', '.join(_BY_NAME)}.")
    return _BY_NAME[name]


def metrics_for(problem_type: str) -> tuple[Metric, ...]:
    """The metrics scored for every job of `problem_type`, in the registry's order."""
    return tuple(entry for entry in METRICS if problem_type in entry.problem_types)


def score_metrics() -> dict[str, tuple[str, ...]]:
    """Problem type -> the names of its metrics (the vocabulary's SCORE_METRICS)."""
    return {problem_type: tuple(entry.name for entry in metrics_for(problem_type))
            for problem_type in PROBLEM_TYPES}


def lower_is_better() -> frozenset[str]:
    return frozenset(entry.name for entry in METRICS if entry.lower_is_better)


def default_metric(problem_type: str) -> str:
    """The metric a card of `problem_type` is scored by when it names none."""
    (entry,) = [entry for entry in METRICS if problem_type in entry.default_for]
    return entry.name


def higher_is_better(name: str) -> bool:
    """The direction of a recorded figure: a score's own, or HIGHER_IS_BETTER_FIGURES' for the others."""
    if name in _BY_NAME:
        return not _BY_NAME[name].lower_is_better
    # serve_onnxruntime_max_qps_at_slo: serve_max_qps_at_slo measured on the onnxruntime stack.
    _, _, figure = name.removeprefix(SERVING_PREFIX).partition("_")
    stack_figure = name.startswith(SERVING_PREFIX) and SERVING_PREFIX + figure in HIGHER_IS_BETTER_FIGURES
    return name in HIGHER_IS_BETTER_FIGURES or stack_figure


def check_metric(problem_type: str, metric: str) -> None:
    """Raise a one-sentence UserError when `metric` does not apply to `problem_type`."""
    if problem_type not in PROBLEM_TYPES:
        raise UserError(f"unknown problem type '{problem_type}'; expected one of {', '.join(PROBLEM_TYPES)}.")
    names = [entry.name for entry in metrics_for(problem_type)]
    if metric not in names:
        raise UserError(
            f"metric '{metric}' does not apply to {problem_type} problems; use one of {', '.join(names)}."
        )


def can_optimise(metric: str, framework: str) -> bool:
    """Whether `framework` (one of METRIC_FRAMEWORKS) has a name for `metric` it can optimise."""
    return framework in get_metric(metric).framework_names


def framework_name(metric: str, framework: str) -> str:
    """`framework`'s own name for `metric` (AutoGluon's eval_metric, H2O's sort_metric, FLAML's metric)."""
    if framework not in METRIC_FRAMEWORKS:
        raise ValueError(f"'{framework}' is not one of the metric frameworks {', '.join(METRIC_FRAMEWORKS)}")
    names = get_metric(metric).framework_names
    if framework not in names:
        optimisable = ", ".join(entry.name for entry in METRICS if framework in entry.framework_names)
        raise UserError(f"{framework} cannot optimise the metric '{metric}'; give the dataset's card a "
                        f"metric it can ({optimisable}).")
    return names[framework]
