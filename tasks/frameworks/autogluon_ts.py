"""AutoGluon TimeSeriesPredictor, in a framework environment of its own (`autogluon_ts@1.6.3`).

autogluon.timeseries 1.6.3 needs transformers<5.15 (for Chronos), which the main environment cannot
have (it pins 5.24), so this framework runs only in .venvs/autogluon_ts-1.6.3, made by
`automl-eval frameworks install autogluon_ts@1.6.3` (torch pinned to the CPU wheel, 2.13.0).
A suite names it with its version; without that environment the plan refuses the suite in one
sentence naming the install command, before any job runs.

Variants are presets (`autogluon_ts:fast_training@1.6.3`); the default is AutoGluon's own. The
search gets the budget's time as `time_limit` (less a reserve for predicting and saving), the
harness's quantile levels, and MASE as its validation metric (OWA's closest single metric).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._forecasting import (
    POINT,
    SERIES,
    TIME,
    VALUE,
    ForecastTableModel,
    forecast_task,
    load_forecast_table,
    long_frame,
)
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, preset_params, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.metric_registry import quantile_column
from tasks.specs import Budget

PREDICTOR_DIR = "predictor"
PRESETS = ("fast_training", "medium_quality", "high_quality", "best_quality")
# AutoGluon finishes its current model and the ensemble after time_limit (as the tabular adapter).
TIME_LIMIT_SHARE = 0.8
TIME_RESERVE_S = 8.0
VERSION = "1.6.3"
# Models that start from pretrained weights fetched from the Hugging Face hub at fit time: offline
# (this project's machines) they fail after a timeout each, so they are excluded by default.
PRETRAINED_MODELS = ("Chronos", "Chronos2", "Toto", "Toto2")
ENVIRONMENTS = (
    EnvironmentSpec(VERSION, requirements=(f"autogluon.timeseries=={VERSION}",),
                    imports=("autogluon.timeseries",)),
)


class AutoGluonForecastModel(ForecastTableModel):
    """Forecasts made on the first predict (AutoGluon's predict is timed as the job's predict)."""

    def __init__(self, task: TaskInfo, predictor: Any, train: pd.DataFrame) -> None:
        super().__init__(task, None, {"best_model": predictor.model_best,
                                      "models": list(predictor.model_names())})
        self.predictor = predictor
        self.train = train

    def forecasts(self) -> pd.DataFrame:
        if self._table is None:
            from autogluon.timeseries import TimeSeriesDataFrame

            data = TimeSeriesDataFrame.from_data_frame(self.train, id_column=SERIES, timestamp_column=TIME)
            predicted = self.predictor.predict(data).reset_index()
            levels = forecast_task(self.task).quantile_levels
            table = pd.DataFrame({SERIES: predicted["item_id"].astype(str).to_numpy(),
                                  TIME: pd.to_datetime(predicted["timestamp"]).to_numpy(),
                                  POINT: predicted["mean"].to_numpy(dtype=float)})
            for level in levels:
                table[quantile_column(level)] = predicted[str(level)].to_numpy(dtype=float)
            # Quantile crossing would make the interval meaningless: sort each row's quantiles.
            columns = [quantile_column(level) for level in levels]
            table[columns] = np.sort(table[columns].to_numpy(), axis=1)
            self._table = table
        return self._table

    def save(self, model_dir: Path) -> None:
        super().save(model_dir)
        shutil.copytree(self.predictor.path, model_dir / PREDICTOR_DIR, dirs_exist_ok=True)

    @property
    def models_count(self) -> int:
        return len(self.details["models"])


class AutoGluonTimeSeriesAdapter(FrameworkAdapter):
    name = "autogluon_ts"
    package = "autogluon.timeseries"
    install_hint = f"automl-eval frameworks install autogluon_ts@{VERSION}"
    problem_types = frozenset({"forecasting"})
    environments = ENVIRONMENTS

    def variant_params(self, variant: str) -> dict[str, Any]:
        return preset_params(self.name, variant, PRESETS)

    def start(self, budget: Budget, workdir: Path) -> None:
        import autogluon.timeseries  # noqa: F401 - seconds of imports belong to start-up, not to the search

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> AutoGluonForecastModel:
        from autogluon.timeseries import TimeSeriesDataFrame, TimeSeriesPredictor

        forecast = forecast_task(task)
        _, framework_params = split_params(params)
        train = long_frame(X, y, forecast)
        predictor = TimeSeriesPredictor(
            prediction_length=forecast.horizon, freq=forecast.frequency, target=VALUE,
            eval_metric="MASE", eval_metric_seasonal_period=forecast.season_length,
            quantile_levels=list(forecast.quantile_levels), path=str(workdir / PREDICTOR_DIR), verbosity=1,
        )
        time_limit = max(1, int(budget.time_s * TIME_LIMIT_SHARE - TIME_RESERVE_S))
        data = TimeSeriesDataFrame.from_data_frame(train, id_column=SERIES, timestamp_column=TIME)
        # Its cores are the job's affinity and thread variables (TimeSeriesPredictor.fit takes no
        # num_cpus); pretrained models are left out unless the suite asks: their weights download.
        framework_params.setdefault("excluded_model_types", list(PRETRAINED_MODELS))
        predictor.fit(data, time_limit=time_limit, random_seed=seed, **framework_params)
        return AutoGluonForecastModel(task, predictor, train)

    def load(self, model_dir: Path, task: TaskInfo) -> ForecastTableModel:
        return load_forecast_table(model_dir, task)


ADAPTER = AutoGluonTimeSeriesAdapter()
