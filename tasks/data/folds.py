"""Fixed, saved outer folds. (Interim: the data work replaces the body, keeps the API.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from tasks.specs import DatasetSpec


def folds_path(spec: DatasetSpec) -> Path:
    """Saved next to the data: datasets/NAME.folds.csv (one fold index per row)."""
    return spec.path.with_name(f"{spec.name}.folds.csv")


def load_folds(spec: DatasetSpec) -> np.ndarray:
    return pd.read_csv(folds_path(spec))["fold"].to_numpy()


def split(spec: DatasetSpec, fold: int) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (train, test) of outer fold `fold`."""
    assignment = load_folds(spec)
    return np.flatnonzero(assignment != fold), np.flatnonzero(assignment == fold)
