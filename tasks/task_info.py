"""What a job's model is asked to learn: the task as an adapter may know it (never the test labels).

A noun of the lowest layer: the data layer builds it for each fold (tasks/data/fold_data.py), the
framework adapters read it (tasks/frameworks/base.py re-exports both types), and nothing here
imports either of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ForecastTask:
    """What a forecasting adapter knows: X holds the `id` and `timestamp` columns, y the values.

    fit gets every series' training part; predict gets the (id, timestamp) rows to forecast, the
    next `horizon` steps of each series at `frequency` (a pandas offset alias)."""

    id: str
    timestamp: str
    frequency: str
    horizon: int
    season_length: int
    quantile_levels: tuple[float, ...] = ()  # quantiles to return too (predict_quantiles), if it can


@dataclass(frozen=True)
class TaskInfo:
    """What an adapter may know about the task (never the test labels)."""

    problem_type: str  # binary | multiclass | regression | forecasting
    target: str
    metric: str  # the suite metric, so AutoML systems optimise what they are scored on
    column_roles: dict[str, str] = field(default_factory=dict)  # numeric | categorical | text
    classes: tuple[Any, ...] = ()  # class labels in a fixed order (classification)
    forecast: ForecastTask | None = None  # forecasting only
    # Rows the job asks the model to predict right after fitting (its test part), so that an adapter
    # whose predicting is slow leaves time for it; None where unknown.
    predict_rows: int | None = None

    @property
    def is_classification(self) -> bool:
        return self.problem_type in ("binary", "multiclass")
