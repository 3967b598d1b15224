"""The forecasting part of a dataset card: which columns are the series, the time and the value.

A forecasting card is an ordinary DatasetSpec (`problem_type: forecasting`, `target` the value
column, the series id and timestamp columns listed with role `id`) plus one block validated here:

    forecast:
      id: series_id          # column naming the series
      timestamp: timestamp   # column of each observation's time
      frequency: YS          # pandas offset alias: YS yearly, QS quarterly, MS monthly
      horizon: 6             # steps forecast per series (the test part of each fold)
      season_length: 1      # the seasonal period m (M4: yearly 1, quarterly 4, monthly 12)
      windows: 1             # rolling origins: fold k ends k * horizon steps before the end
      min_history: 6         # the shortest training part a series may have (the gate checks it)
"""

from __future__ import annotations

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tasks.errors import UserError
from tasks.specs import DatasetSpec

FORECAST_FIELD = "forecast"


class ForecastSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    timestamp: str
    frequency: str
    horizon: int = Field(gt=0)
    season_length: int = Field(default=1, gt=0)
    windows: int = Field(default=1, gt=0)
    min_history: int = Field(default=1, gt=0)

    @field_validator("frequency")
    @classmethod
    def _pandas_frequency(cls, value: str) -> str:
        try:
            pd.tseries.frequencies.to_offset(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a pandas frequency; use e.g. YS, QS or MS") from None
        return value

    @property
    def min_length(self) -> int:
        """The shortest series the card accepts: every window's test part plus the minimum history."""
        return self.windows * self.horizon + self.min_history


def forecast_card(spec: DatasetSpec) -> ForecastSpec:
    """The card's `forecast:` block, checked; one sentence naming the field when it is wrong."""
    where = spec.card_path or f"dataset '{spec.name}'"
    block = spec.forecast
    if spec.problem_type != "forecasting":
        raise UserError(f"{where}: problem_type is '{spec.problem_type}'; set 'problem_type: forecasting' "
                        "to use the 'forecast' block.")
    if not isinstance(block, dict):
        raise UserError(f"{where}: field '{FORECAST_FIELD}' is required for a forecasting card; add "
                        "{id, timestamp, frequency, horizon, season_length}.")
    try:
        card = ForecastSpec(**block)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join([FORECAST_FIELD, *(str(p) for p in first["loc"])])
        if first["type"] == "missing":
            raise UserError(f"{where}: field '{field}' is required; add it.") from None
        if first["type"] == "extra_forbidden":
            raise UserError(f"{where}: unknown field '{field}'; remove it or check its spelling.") from None
        raise UserError(f"{where}: field '{field}': {first['msg']}.") from None
    for field, column in (("id", card.id), ("timestamp", card.timestamp)):
        if spec.columns.get(column) != "id":
            raise UserError(f"{where}: field '{FORECAST_FIELD}.{field}': list '{column}' in `columns` with "
                            "role id (frameworks get it as the series key, not as a feature).")
    if spec.folds is not None:
        raise UserError(f"{where}: field 'folds': a forecasting card's folds are its last horizons; "
                        f"remove 'folds' and set '{FORECAST_FIELD}.windows' for rolling origins.")
    return card
