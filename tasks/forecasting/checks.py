"""The forecasting gate: what a collection of series must satisfy before any framework sees it.

Computed with pandas and reported with the data gate's other checks (tasks/data/validate.py):
- no duplicate (series, timestamp) pairs;
- timestamps regular per series: every step is one period of the card's frequency;
- no series shorter than its test windows plus the card's minimum history;
- the target finite (the gate's Great Expectations suite checks it for every numeric target).
Each failure is one sentence naming the dataset, the column and what was seen.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from tasks.forecasting.card import ForecastSpec


def _examples(items: list[str], total: int) -> str:
    shown = ", ".join(items[:3])
    return shown + (f" and {total - 3} more" if total > 3 else "")


def series_checks(name: str, frame: pd.DataFrame, card: ForecastSpec) -> list[tuple[str, bool, str, Any]]:
    """(check, passed, failure sentence, observed) for each forecasting check."""
    times = pd.to_datetime(frame[card.timestamp], errors="coerce")
    series = frame[card.id].astype(str)
    results: list[tuple[str, bool, str, Any]] = []

    unparsed = int(times.isna().sum())
    if unparsed:
        sentence = (f"{name}: column '{card.timestamp}' has {unparsed} values that are not dates, e.g. "
                    f"{frame.loc[times.isna(), card.timestamp].iloc[0]!r}; fix the file.")
        return [("timestamps_parse", False, sentence, unparsed)]

    keys = pd.DataFrame({"series": series.to_numpy(), "time": times.to_numpy()})
    duplicated = keys.duplicated(keep="first")
    examples = [f"'{row.series}' at {row.time:%Y-%m-%d}" for row in keys[duplicated].head(3).itertuples()]
    results.append(("no_duplicate_timestamps", not duplicated.any(),
                    f"{name}: column '{card.timestamp}' repeats {int(duplicated.sum())} (series, timestamp) "
                    f"pairs ({_examples(examples, int(duplicated.sum()))}); keep one row per series and "
                    "time." if duplicated.any() else "", int(duplicated.sum())))

    offset = pd.tseries.frequencies.to_offset(card.frequency)
    irregular: list[str] = []
    for key, group in keys.drop_duplicates().sort_values(["series", "time"]).groupby("series", sort=True):
        stamps = pd.DatetimeIndex(group["time"])
        expected = pd.date_range(stamps[0], periods=len(stamps), freq=offset)
        if not stamps.equals(expected):
            at = int(np.argmax(stamps != expected))
            irregular.append(f"'{key}' has {stamps[at]:%Y-%m-%d} where {expected[at]:%Y-%m-%d} was due")
    results.append(("regular_timestamps", not irregular,
                    f"{name}: column '{card.timestamp}' is not regular at frequency {card.frequency} in "
                    f"{len(irregular)} series ({_examples(irregular, len(irregular))}); fill the gaps or fix "
                    "the card's forecast.frequency." if irregular else "", len(irregular)))

    lengths = series.value_counts()
    short = lengths[lengths < card.min_length].sort_values()
    described = [f"'{key}' has {count}" for key, count in short.items()]
    results.append(("series_long_enough", short.empty,
                    f"{name}: column '{card.id}' has {len(short)} series shorter than {card.min_length} "
                    f"observations ({card.windows} x horizon {card.horizon} + min_history "
                    f"{card.min_history}): {_examples(described, len(short))}; drop them or lower "
                    "forecast.windows / forecast.min_history." if not short.empty else "",
                    {str(k): int(v) for k, v in short.head(10).items()}))
    return results
