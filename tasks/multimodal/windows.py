"""Cut the aligned grid into windows: per-window features per stream column, one label each."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tasks.multimodal.cards import FEATURE_SEPARATOR, AlignmentSpec
from tasks.multimodal.clock import TIME

WINDOW_START = "window_start_s"
SEGMENT = "segment"  # index of the label segment a window belongs to (folds keep it together)

_STATS = {
    "mean": lambda v: v.mean(axis=0),
    "std": lambda v: v.std(axis=0),
    "min": lambda v: v.min(axis=0),
    "max": lambda v: v.max(axis=0),
    "median": lambda v: np.median(v, axis=0),
    "rms": lambda v: np.sqrt((v**2).mean(axis=0)),
}


@dataclass(frozen=True)
class WindowCounts:
    windows: int  # windows the common span holds
    kept: int
    sparse: int  # too few aligned rows (samples were dropped there)
    unlabelled: int  # no label covers enough of the window (a boundary or an unlabelled stretch)


def window_table(
    aligned: pd.DataFrame,
    value_columns: list[str],
    segments: pd.DataFrame,
    alignment: AlignmentSpec,
    grid_period_s: float,
    target: str,
) -> tuple[pd.DataFrame, WindowCounts]:
    """One row per kept window: WINDOW_START, SEGMENT, the features, and the target."""
    step = alignment.step_s or alignment.window_s
    times = aligned[TIME].to_numpy()
    values = aligned[value_columns].to_numpy(dtype=float)
    expected_rows = alignment.window_s / grid_period_s
    # Windows start on multiples of the step on the reference clock, so they line up with labels.
    first = np.ceil(times[0] / step - 1e-9) * step if len(times) else 0.0
    starts = np.arange(first, times[-1] - alignment.window_s + 1e-9, step) if len(times) else np.empty(0)
    seg_start = segments["start"].to_numpy(dtype=float)
    seg_end = segments["end"].to_numpy(dtype=float)
    rows: list[dict[str, object]] = []
    sparse = unlabelled = 0
    for start in starts:
        end = start + alignment.window_s
        low, high = np.searchsorted(times, [start, end], side="left")
        if high - low < alignment.min_fill * expected_rows:
            sparse += 1
            continue
        cover = np.clip(np.minimum(seg_end, end) - np.maximum(seg_start, start), 0, None)
        best = int(np.argmax(cover)) if len(cover) else -1
        if best < 0 or cover[best] < alignment.label_purity * alignment.window_s:
            unlabelled += 1
            continue
        row: dict[str, object] = {WINDOW_START: round(float(start), 6), SEGMENT: best}
        chunk = values[low:high]
        for stat in alignment.features:
            for column, value in zip(value_columns, _STATS[stat](chunk), strict=True):
                stream, name = column.split(FEATURE_SEPARATOR, 1)
                row[FEATURE_SEPARATOR.join((stream, name, stat))] = float(value)
        row[target] = segments["label"].iloc[best]
        rows.append(row)
    counts = WindowCounts(len(starts), len(rows), sparse, unlabelled)
    return pd.DataFrame(rows), counts
