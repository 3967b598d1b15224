"""statsforecast's automatic local models: AutoETS (the default), AutoARIMA or AutoTheta.

`statsforecast` in a suite is AutoETS; `statsforecast:AutoARIMA` and `statsforecast:AutoTheta` pick
the others. Each series gets its own model, fit and forecast in one pass (StatsForecast.forecast),
with 80% prediction intervals as the 0.1 and 0.9 quantiles (the point forecast is the median: the
intervals are symmetric). The job's cores are statsforecast's n_jobs.

statsforecast has no time limit of its own, so series are forecast in batches and, once the budget's
time is nearly spent, the remaining series get a seasonal naive forecast instead (counted in the
job's info as `series_fallback`) rather than a watchdog kill that would lose every forecast.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._forecasting import (
    POINT,
    SERIES,
    TIME,
    ForecastTableModel,
    forecast_task,
    load_forecast_table,
    long_frame,
)
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.metric_registry import quantile_column
from tasks.specs import Budget

MODELS = ("AutoETS", "AutoARIMA", "AutoTheta")
DEFAULT_MODEL = "AutoETS"
INTERVAL_LEVEL = 80  # the 0.1 and 0.9 quantiles
# Share of the budget's time for the chosen model; the rest is left for the fallback and saving.
TIME_SHARE = 0.8
SERIES_PER_BATCH = 32  # per core: small enough to stop near the budget, large enough to keep n_jobs busy


class StatsForecastAdapter(FrameworkAdapter):
    name = "statsforecast"
    package = "statsforecast"
    install_hint = "pip install statsforecast"
    problem_types = frozenset({"forecasting"})

    def variant_params(self, variant: str) -> dict[str, Any]:
        if variant not in MODELS:
            raise ValueError(f"statsforecast has no variant '{variant}'; models are: {', '.join(MODELS)}")
        return {"_model": variant}

    def start(self, budget: Budget, workdir: Path) -> None:
        import statsforecast.models  # noqa: F401 - its imports belong to start-up, not to the search

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> ForecastTableModel:
        import statsforecast.models as models
        from statsforecast import StatsForecast

        forecast = forecast_task(task)
        adapter_params, framework_params = split_params(params)
        model_name = str(adapter_params.get("model", DEFAULT_MODEL))
        if model_name not in MODELS:
            raise ValueError(f"statsforecast: param '_model' must be one of {', '.join(MODELS)}, "
                             f"not {model_name!r}")
        model = getattr(models, model_name)(season_length=forecast.season_length, **framework_params)
        fallback = models.SeasonalNaive(season_length=forecast.season_length)
        train = long_frame(X, y, forecast)
        series = train[SERIES].unique()
        batch = SERIES_PER_BATCH * budget.cores
        deadline = time.monotonic() + TIME_SHARE * budget.time_s
        pieces, fallen_back = [], 0
        for start in range(0, len(series), batch):
            chosen = series[start:start + batch]
            late = time.monotonic() > deadline
            method = fallback if late else model
            fallen_back += len(chosen) if late else 0
            engine = StatsForecast(models=[method], freq=forecast.frequency, n_jobs=budget.cores,
                                   fallback_model=models.SeasonalNaive(season_length=forecast.season_length))
            part = engine.forecast(df=train[train[SERIES].isin(chosen)], h=forecast.horizon,
                                   level=[INTERVAL_LEVEL])
            pieces.append(_standard_columns(part, str(getattr(method, "alias", repr(method)))))
        table = pd.concat(pieces, ignore_index=True)
        details = {"model": model_name, "series": int(len(series)), "series_fallback": fallen_back}
        return ForecastTableModel(task, table, details)

    def load(self, model_dir: Path, task: TaskInfo) -> ForecastTableModel:
        return load_forecast_table(model_dir, task)


def _standard_columns(part: pd.DataFrame, alias: str) -> pd.DataFrame:
    """statsforecast's MODEL, MODEL-lo-80, MODEL-hi-80 as mean and the 0.1, 0.5, 0.9 quantiles."""
    part = part.reset_index() if SERIES not in part.columns else part
    point = part[alias].to_numpy(dtype=float)
    low = part[f"{alias}-lo-{INTERVAL_LEVEL}"].to_numpy(dtype=float)
    high = part[f"{alias}-hi-{INTERVAL_LEVEL}"].to_numpy(dtype=float)
    return pd.DataFrame({SERIES: part[SERIES].astype(str).to_numpy(), TIME: part[TIME].to_numpy(),
                         POINT: point, quantile_column(0.1): np.minimum(low, point),
                         quantile_column(0.5): point, quantile_column(0.9): np.maximum(high, point)})


ADAPTER = StatsForecastAdapter()
