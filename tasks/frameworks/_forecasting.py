"""What forecasting adapters share: the training series in long form, and a model that is its forecasts.

A local statistical model (ETS, ARIMA, Naive2) is fit per series and forecasts the next `horizon`
steps of each; the model a forecasting adapter returns holds that forecast table (series id,
timestamp, point forecast, quantiles when the framework gives them) and answers predict(X) by
looking up X's (id, timestamp) rows. Saved as Parquet, it loads in any environment (no pickles).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.base import FittedModel, ForecastTask, TaskInfo

FORECASTS_FILE = "forecasts.parquet"
INFO_FILE = "forecast_info.json"
# Column names of the long form every forecasting library here reads (statsforecast's own).
SERIES, TIME, VALUE, POINT = "unique_id", "ds", "y", "mean"


def forecast_task(task: TaskInfo) -> ForecastTask:
    if task.forecast is None:
        raise ValueError(f"a forecasting adapter got a {task.problem_type} task")
    return task.forecast


def long_frame(X: pd.DataFrame, y: pd.Series, forecast: ForecastTask) -> pd.DataFrame:
    """unique_id, ds, y of every training row, each series in time order."""
    frame = pd.DataFrame({SERIES: X[forecast.id].astype(str).to_numpy(),
                          TIME: pd.to_datetime(X[forecast.timestamp]).to_numpy(),
                          VALUE: pd.to_numeric(y).to_numpy(dtype=float)})
    return frame.sort_values([SERIES, TIME], kind="stable").reset_index(drop=True)


def future_times(last: pd.Timestamp, forecast: ForecastTask) -> pd.DatetimeIndex:
    """The `horizon` timestamps after `last` at the card's frequency."""
    return pd.date_range(last, periods=forecast.horizon + 1, freq=forecast.frequency)[1:]


def per_series_forecasts(
    train: pd.DataFrame, forecast: ForecastTask, method: Callable[[np.ndarray, int, int], np.ndarray]
) -> pd.DataFrame:
    """The forecast table of a method that forecasts one series from its values (the baselines)."""
    pieces = []
    for series, group in train.groupby(SERIES, sort=False):
        values = group[VALUE].to_numpy(dtype=float)
        pieces.append(pd.DataFrame({
            SERIES: series,
            TIME: future_times(group[TIME].iloc[-1], forecast),
            POINT: method(values, forecast.horizon, forecast.season_length),
        }))
    return pd.concat(pieces, ignore_index=True)


class ForecastTableModel(FittedModel):
    """A forecasting model as the worker sees it: its forecasts, looked up by (series id, timestamp)."""

    def __init__(self, task: TaskInfo, table: pd.DataFrame | None = None,
                 details: dict[str, Any] | None = None) -> None:
        self.task = task
        self._table = table
        self.details = details or {}

    def forecasts(self) -> pd.DataFrame:
        """unique_id, ds, mean and quantile columns (q0.1, ...); subclasses may compute it lazily."""
        if self._table is None:
            raise RuntimeError("this model has no forecasts")
        return self._table

    def _rows(self, X: pd.DataFrame) -> pd.DataFrame:
        forecast = forecast_task(self.task)
        wanted = pd.DataFrame({SERIES: X[forecast.id].astype(str).to_numpy(),
                               TIME: pd.to_datetime(X[forecast.timestamp]).to_numpy()})
        table = self.forecasts()
        found = wanted.merge(table, on=[SERIES, TIME], how="left", validate="many_to_one")
        missing = found[POINT].isna()
        if missing.any():
            first = found.loc[missing].iloc[0]
            raise ValueError(f"no forecast for {int(missing.sum())} of {len(X)} rows, e.g. series "
                             f"{first[SERIES]!r} at {first[TIME]} (beyond the horizon, or an unknown series)")
        return found

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return self._rows(X)[POINT].to_numpy(dtype=float)

    def predict_quantiles(self, X: pd.DataFrame) -> pd.DataFrame | None:
        found = self._rows(X)
        columns = [c for c in found.columns if c.startswith("q")]
        return found[columns].reset_index(drop=True) if columns else None

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        self.forecasts().to_parquet(model_dir / FORECASTS_FILE, index=False)
        (model_dir / INFO_FILE).write_text(json.dumps(self.details, indent=2, default=str))

    def info(self) -> dict[str, Any]:
        return dict(self.details)


def load_forecast_table(model_dir: Path, task: TaskInfo) -> ForecastTableModel:
    details = json.loads((model_dir / INFO_FILE).read_text()) if (model_dir / INFO_FILE).is_file() else {}
    return ForecastTableModel(task, pd.read_parquet(model_dir / FORECASTS_FILE), details)
