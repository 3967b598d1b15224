"""Naive2: M4's seasonally adjusted naive benchmark (tasks/forecasting/baselines.py), the one OWA is
relative to. As a framework it shows the baseline in the leaderboard (its OWA is 1 by definition)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tasks.forecasting.baselines import is_seasonal, naive2
from tasks.frameworks._forecasting import (
    SERIES,
    VALUE,
    ForecastTableModel,
    forecast_task,
    load_forecast_table,
    long_frame,
    per_series_forecasts,
)
from tasks.frameworks.base import FrameworkAdapter, TaskInfo
from tasks.specs import Budget


class Naive2Adapter(FrameworkAdapter):
    name = "naive2"
    package = "statsmodels"  # its classical decomposition and autocorrelation
    install_hint = "pip install statsmodels"
    problem_types = frozenset({"forecasting"})

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> ForecastTableModel:
        forecast = forecast_task(task)
        train = long_frame(X, y, forecast)
        table = per_series_forecasts(train, forecast, naive2)
        seasonal = sum(is_seasonal(group.to_numpy(dtype=float), forecast.season_length)
                       for _, group in train.groupby(SERIES)[VALUE])
        return ForecastTableModel(task, table, {"method": "Naive2 (M4)", "seasonal_series": seasonal,
                                                "series": int(train[SERIES].nunique())})

    def load(self, model_dir: Path, task: TaskInfo) -> ForecastTableModel:
        return load_forecast_table(model_dir, task)


ADAPTER = Naive2Adapter()
