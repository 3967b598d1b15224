"""Forecasting folds: the last `horizon` steps of every series are the test part (fold 0); with
`windows: K`, fold k is the horizon that ends k * horizon steps earlier (rolling origins).

Saved like every other folds file (one id per data row, datasets/NAME.folds.csv), so every
framework sees the same split: the id of a row is the window it is tested in, or TRAIN_ONLY (-1)
for history that is only ever trained on. Fold k trains on every row before its window: the
history and the windows further back (ids > k); later rows are never seen.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.forecasting.card import ForecastSpec

TRAIN_ONLY = -1


def assign_windows(frame: pd.DataFrame, card: ForecastSpec) -> np.ndarray:
    """Window id per row (0 = the last horizon of its series), TRAIN_ONLY before the first window."""
    times = pd.to_datetime(frame[card.timestamp])
    order = pd.DataFrame({"series": frame[card.id].to_numpy(), "time": times.to_numpy()})
    # Steps from the end of its series: 0 for the last observation.
    from_end = order.groupby("series", sort=False)["time"].rank(method="first", ascending=False) - 1
    window = (from_end.to_numpy().astype(np.int64)) // card.horizon
    return np.where(window < card.windows, window, TRAIN_ONLY).astype(np.int64)


def train_mask(assignment: np.ndarray, fold: int) -> np.ndarray:
    """Rows fold `fold` trains on: everything before its window."""
    return (assignment == TRAIN_ONLY) | (assignment > fold)
