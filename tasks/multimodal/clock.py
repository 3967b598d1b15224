"""Read one stream onto a float-seconds clock and clean it: sort, drop duplicates, count gaps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tasks.errors import UserError
from tasks.multimodal.cards import StreamSpec, stream_path

TIME = "t"  # the float-seconds time column every cleaned stream carries


@dataclass(frozen=True)
class CleanStream:
    name: str
    frame: pd.DataFrame  # TIME + the stream's columns, sorted, one row per distinct time
    raw_samples: int
    duplicates: int  # rows sharing a timestamp with an earlier row (kept: the first)
    missing: int  # samples the nominal rate implies inside gaps
    rate_hz: float  # nominal rate: 1 / median sample interval

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz


def stream_times(frame: pd.DataFrame, stream: StreamSpec, where: str) -> np.ndarray:
    """Each sample's time on the stream's own clock, in seconds."""
    clock = stream.clock
    if clock.rate_hz is not None:
        return clock.start_s + np.arange(len(frame)) / clock.rate_hz
    if clock.timestamp not in frame.columns:
        raise UserError(f"{where}: clock.timestamp column '{clock.timestamp}' is not in the stream file.")
    values = frame[clock.timestamp]
    if clock.unit == "datetime":
        stamps = pd.to_datetime(values, errors="coerce")
        if stamps.isna().any():
            raise UserError(
                f"{where}: clock.timestamp '{clock.timestamp}' has values that are not datetimes."
            )
        return (stamps - pd.Timestamp(0)).dt.total_seconds().to_numpy()
    seconds = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)
    if np.isnan(seconds).any():
        raise UserError(f"{where}: clock.timestamp '{clock.timestamp}' has values that are not numbers.")
    return seconds / 1000.0 if clock.unit == "ms" else seconds


def read_stream(name: str, stream: StreamSpec, card_path: str) -> CleanStream:
    """Load, time, sort and de-duplicate one stream; count what was dropped and what is missing."""
    where = f"{card_path}: streams.{name}"
    path = stream_path(stream)
    if not path.is_file():
        raise UserError(f"{where}: file {path} not found; run `automl-eval datasets build`.")
    raw = pd.read_csv(path)
    absent = [c for c in stream.columns if c not in raw.columns]
    if absent:
        raise UserError(f"{where}: columns {absent} are not in {path}.")
    if len(raw) < 3:
        raise UserError(f"{where}: {path} has {len(raw)} rows; a stream needs at least 3 samples.")
    frame = raw[stream.columns].astype(float)
    frame.insert(0, TIME, stream_times(raw, stream, where))
    frame = frame.sort_values(TIME, kind="stable")
    # Microsecond rounding: two samples closer than that are the same sample written twice.
    duplicated = frame[TIME].round(6).duplicated(keep="first")
    frame = frame.loc[~duplicated].reset_index(drop=True)
    intervals = np.diff(frame[TIME].to_numpy())
    median = float(np.median(intervals))
    if median <= 0:
        raise UserError(f"{where}: the clock does not advance (median sample interval {median} s).")
    regular = intervals[intervals <= 1.5 * median]
    # Mean of the regular intervals: a median would pick one side of timestamps rounded to the ms.
    period = float(regular.mean())
    gaps = intervals[intervals > 1.5 * median]
    missing = int(np.sum(np.round(gaps / period) - 1))
    return CleanStream(name, frame, len(raw), int(duplicated.sum()), missing, 1.0 / period)
