"""The space in which boundary samples are searched: each test row as a vector of numbers.

A numeric feature is one coordinate in units of its spread on the training fold (so one unit is
one spread whatever the column's scale); a categorical feature is one coordinate holding its
category's index, rounded when decoded, so moving it by one changes the category and counts as
one unit. Other columns (text, and cells that are missing) are never perturbed: they are copied
from the row as it was. Distances are Euclidean over these units.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from pandas.api.types import is_numeric_dtype

# Numeric coordinates may go this many spreads past the training range (the attack's clip box).
MARGIN_SPREADS = 1.0
# A numeric coordinate moved by less than this many spreads does not count as a changed feature.
CHANGED_SPREADS = 0.05


@dataclass
class FeatureSpace:
    numeric: list[str]
    categorical: list[str]
    centre: np.ndarray  # per numeric column
    spread: np.ndarray  # per numeric column, > 0
    categories: dict[str, list[object]]  # per categorical column, the values seen in training

    @classmethod
    def of(cls, train: pd.DataFrame, roles: dict[str, str]) -> FeatureSpace:
        numeric = [c for c in train.columns if roles.get(c, "numeric") == "numeric"
                   and is_numeric_dtype(train[c]) and train[c].notna().sum() > 1]
        categorical = [c for c in train.columns if roles.get(c) == "categorical"
                       and 1 < train[c].dropna().nunique() <= 1000]
        values = train[numeric].astype(float)
        centre = values.median().to_numpy(dtype=float)
        spread = values.std().to_numpy(dtype=float)
        spread = np.where(np.isfinite(spread) & (spread > 0), spread, 1.0)
        categories = {c: sorted(train[c].dropna().unique().tolist(), key=str) for c in categorical}
        return cls(numeric, categorical, centre, spread, categories)

    @property
    def columns(self) -> list[str]:
        return self.numeric + self.categorical

    @property
    def dimensions(self) -> int:
        return len(self.numeric) + len(self.categorical)

    def bounds(self, train: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """The box a search stays in: the training range plus a margin; category indices 0..k-1."""
        values = (train[self.numeric].astype(float).to_numpy() - self.centre) / self.spread
        low = np.concatenate([np.nanmin(values, axis=0) - MARGIN_SPREADS,
                              np.zeros(len(self.categorical))])
        high = np.concatenate([np.nanmax(values, axis=0) + MARGIN_SPREADS,
                               [len(self.categories[c]) - 1 for c in self.categorical]])
        return low.astype(np.float32), high.astype(np.float32)

    def encode(self, frame: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
        """(vectors, mutable): a missing cell, or a category unseen in training, is not mutable
        and encodes as 0 (the decoder copies the original cell back)."""
        numeric = (frame[self.numeric].astype(float).to_numpy() - self.centre) / self.spread
        mutable_numeric = np.isfinite(numeric)
        parts, mutable = [np.nan_to_num(numeric, nan=0.0)], [mutable_numeric]
        for column in self.categorical:
            index = {str(v): i for i, v in enumerate(self.categories[column])}
            codes = frame[column].astype(object).map(lambda v, index=index: index.get(str(v), -1))
            codes = codes.where(frame[column].notna(), -1).to_numpy(dtype=float)
            parts.append(np.where(codes >= 0, codes, 0.0)[:, None])
            mutable.append((codes >= 0)[:, None])
        return np.hstack(parts).astype(np.float32), np.hstack(mutable)

    def decode(self, vectors: np.ndarray, templates: pd.DataFrame, mutable: np.ndarray) -> pd.DataFrame:
        """Rows of `templates` with their mutable coordinates replaced by `vectors` (one row each)."""
        frame = templates.reset_index(drop=True).copy()
        vectors = np.asarray(vectors, dtype=float).reshape(len(frame), self.dimensions)
        n_numeric = len(self.numeric)
        if n_numeric:
            values = self.centre + vectors[:, :n_numeric] * self.spread
            original = frame[self.numeric].astype(float).to_numpy()
            values = np.where(mutable[:, :n_numeric], values, original)
            for k, column in enumerate(self.numeric):
                frame[column] = _like(values[:, k], frame[column])
        for k, column in enumerate(self.categorical):
            choices = self.categories[column]
            index = np.clip(np.rint(vectors[:, n_numeric + k]), 0, len(choices) - 1).astype(int)
            new = pd.Series([choices[i] for i in index], index=frame.index, dtype=object)
            keep = ~mutable[:, n_numeric + k]
            merged = new.where(~keep, frame[column].astype(object))
            frame[column] = merged.astype(frame[column].dtype) if isinstance(
                frame[column].dtype, pd.CategoricalDtype) else merged
        return frame

    def distance(self, original: np.ndarray, moved: np.ndarray) -> tuple[float, list[str]]:
        """Euclidean distance in spread units, a category change counting one unit, after rounding
        categories as the decoder does; and the features changed."""
        delta = np.asarray(moved, dtype=float) - np.asarray(original, dtype=float)
        n_numeric = len(self.numeric)
        numeric = delta[:n_numeric]
        changed_categories = np.rint(moved[n_numeric:]) != np.rint(original[n_numeric:])
        squared = float(np.sum(numeric**2) + np.sum(changed_categories))
        changed = [c for c, d in zip(self.numeric, numeric, strict=True) if abs(d) >= CHANGED_SPREADS]
        changed += [c for c, flag in zip(self.categorical, changed_categories, strict=True) if flag]
        return float(np.sqrt(squared)), changed


def _like(values: np.ndarray, column: pd.Series) -> pd.Series:
    """Values cast back to the column's dtype where that loses nothing the model reads (integers
    are rounded: a search in continuous space still hands the model the kind of value it knows)."""
    if pd.api.types.is_integer_dtype(column.dtype):
        return pd.Series(np.rint(values), index=column.index).astype(column.dtype)
    return pd.Series(values, index=column.index).astype(float)
