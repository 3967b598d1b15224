"""The statistics of `compare`: a cell's run-to-run noise and the z-score of a change against it."""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import pandas as pd


def noise_std(values: pd.DataFrame, column: str) -> float:
    """The baseline's run-to-run spread: pooled std between seeds within folds, else std over folds."""
    within = values.groupby("fold")[column].agg(["var", "count"]).dropna()
    within = within[within["count"] >= 2]
    if len(within):
        return float(math.sqrt((within["var"] * (within["count"] - 1)).sum() / (within["count"] - 1).sum()))
    return float(values[column].std()) if values[column].notna().sum() >= 2 else float("nan")


def z_score(change: float, std: float, base_count: int, cand_count: int) -> float:
    """Change over the standard error of a difference of two means; NaN when the noise is unknown."""
    if not np.isfinite(std):
        return float("nan")
    if change == 0:
        return 0.0
    standard_error = std * math.sqrt(1 / base_count + 1 / cand_count)
    return change / standard_error if standard_error > 0 else math.copysign(float("inf"), change)


def relative_noise(base: pd.DataFrame, quantities: Iterable[str]) -> dict[str, float]:
    """Median over cells of std / |mean|: the noise of a cell that has a single run."""
    ok = base[base["ok"]]
    noise = {}
    for quantity in quantities:
        if quantity not in ok:
            continue
        ratios = []
        for _, cell in ok.groupby(["dataset", "framework"]):
            std, mean = noise_std(cell, quantity), cell[quantity].mean()
            if np.isfinite(std) and mean:
                ratios.append(std / abs(mean))
        noise[quantity] = float(np.median(ratios)) if ratios else float("nan")
    return noise
