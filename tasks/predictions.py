"""The columns of a job's predictions.csv, defined once.

The worker writes them, the harness scores from them, tracking's pyfunc model returns them, and
reports read them: one row per test row, with its position in the fold (`row`), the truth, the
prediction, then one probability column per class (classification), or, for a forecast, the
series and time of each point next to it and one column per quantile (tasks.metric_registry.quantile_column).
"""

from __future__ import annotations

from typing import Any

PREDICTIONS_FILE = "predictions.csv"
ROW = "row"  # the test row's position in the dataset
TRUTH = "truth"
PREDICTION = "prediction"
PROBA_PREFIX = "proba_"  # then the class label: proba_yes, proba_0
# A forecast's points in long format: the series and the time of each, after ROW.
FORECAST_ID, FORECAST_TIME = "series_id", "timestamp"


def proba_column(label: Any) -> str:
    """The probability column of one class."""
    return f"{PROBA_PREFIX}{label}"


def is_proba_column(name: str) -> bool:
    return name.startswith(PROBA_PREFIX)
