"""The harness's scores of a forecasting job: its predictions.csv against the fold's truth, with
MASE scaled by each series' training part and OWA relative to Naive2, which the harness forecasts
itself on the same fold (never taken from a Naive2 job, which a suite need not run).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pandas as pd

from tasks.data.fold_data import load_fold, series_histories
from tasks.forecasting.baselines import naive2
from tasks.forecasting.card import forecast_card
from tasks.metrics import score_forecasts
from tasks.predictions import FORECAST_ID, FORECAST_TIME, PREDICTION, TRUTH
from tasks.specs import DatasetSpec


@lru_cache(maxsize=8)
def reference(spec_json: str, fold: int) -> tuple[dict[str, np.ndarray], pd.DataFrame]:
    """Each series' training values, and Naive2's forecast of the fold (series id, timestamp, naive2).

    Cached by the card (as JSON: it is the data's identity along with the fold) so the jobs of one
    fold in one process share it."""
    spec = DatasetSpec.model_validate_json(spec_json)
    fold_data = load_fold(spec, fold)
    forecast = fold_data.task.forecast
    assert forecast is not None
    histories = series_histories(fold_data)
    test = fold_data.X_test.sort_values([forecast.id, forecast.timestamp], kind="stable")
    steps = test.groupby(forecast.id).cumcount().to_numpy()
    naive = np.empty(len(test))
    for series, positions in test.groupby(forecast.id).indices.items():
        ahead = naive2(histories[str(series)], int(steps[positions].max()) + 1, forecast.season_length)
        naive[positions] = ahead[steps[positions]]
    table = pd.DataFrame({FORECAST_ID: test[forecast.id].astype(str).to_numpy(),
                          FORECAST_TIME: pd.to_datetime(test[forecast.timestamp]).to_numpy(),
                          "naive2": naive})
    return histories, table


def score_predictions(spec: DatasetSpec, fold: int, predictions: pd.DataFrame) -> dict[str, float]:
    """Every forecasting metric of one job's predictions.csv (tasks/metrics.py score_forecasts)."""

    histories, naive_table = reference(spec.model_dump_json(), fold)
    rows = predictions.assign(**{FORECAST_ID: predictions[FORECAST_ID].astype(str),
                                 FORECAST_TIME: pd.to_datetime(predictions[FORECAST_TIME])})
    rows = rows.merge(naive_table, on=[FORECAST_ID, FORECAST_TIME], how="left", validate="one_to_one")
    if rows["naive2"].isna().any() or len(rows) != len(naive_table):
        raise ValueError(f"predictions.csv has {len(rows)} rows, {int(rows['naive2'].isna().sum())} of them "
                         f"outside the fold's {len(naive_table)} test points")
    quantile_columns = [c for c in rows.columns if c.startswith("q") and c[1:].replace(".", "", 1).isdigit()]
    return score_forecasts(
        str(spec.metric), rows[FORECAST_ID].to_numpy(), rows[TRUTH].to_numpy(dtype=float),
        rows[PREDICTION].to_numpy(dtype=float), rows["naive2"].to_numpy(dtype=float), histories,
        forecast_card(spec).season_length, rows[quantile_columns] if quantile_columns else None,
    )
