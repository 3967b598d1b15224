"""Seasonal naive: each step ahead repeats the value one season earlier (M4's sNaive benchmark)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tasks.forecasting.baselines import seasonal_naive
from tasks.frameworks._forecasting import (
    ForecastTableModel,
    forecast_task,
    load_forecast_table,
    long_frame,
    per_series_forecasts,
)
from tasks.frameworks.base import FrameworkAdapter, TaskInfo
from tasks.specs import Budget


class SeasonalNaiveAdapter(FrameworkAdapter):
    name = "seasonal_naive"
    package = "statsmodels"  # nothing of its own: the version shown is the project's scientific stack
    install_hint = "pip install statsmodels"
    problem_types = frozenset({"forecasting"})

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> ForecastTableModel:
        forecast = forecast_task(task)
        table = per_series_forecasts(long_frame(X, y, forecast), forecast, seasonal_naive)
        return ForecastTableModel(task, table, {"method": "seasonal naive"})

    def load(self, model_dir: Path, task: TaskInfo) -> ForecastTableModel:
        return load_forecast_table(model_dir, task)


ADAPTER = SeasonalNaiveAdapter()
