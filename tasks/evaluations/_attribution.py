"""Model-agnostic attribution on a test fold: permutation importance and its fidelity (PGI/PGU).

Plain pandas/numpy/scipy on a prediction function, so every framework gets the same treatment.
Both are bounded by a deadline and say how far they got instead of truncating silently.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

BATCH_ROWS = 20_000  # rows per model call when shuffled copies are stacked
# A model's answer on a frame: (predictions, class probabilities or None for regression).
Predict = Callable[[pd.DataFrame], tuple[np.ndarray, pd.DataFrame | None]]
# The harness's score of one answer: higher is better (the suite metric's `result`).
Score = Callable[[np.ndarray, pd.DataFrame | None], float]


@dataclass
class PermutationImportance:
    table: pd.DataFrame  # feature, importance_mean, importance_std, ci_low, ci_high, repeats, rank
    baseline_result: float
    repeats_done: int  # full passes over every feature (the table uses only these)
    repeats_asked: int

    @property
    def complete(self) -> bool:
        return self.repeats_done >= self.repeats_asked


def shuffled(frame: pd.DataFrame, columns: list[str], rng: np.random.Generator) -> pd.DataFrame:
    """A copy of `frame` with each of `columns` permuted over the rows (ties to other columns broken)."""
    copy = frame.copy()
    for column in columns:
        copy[column] = copy[column].to_numpy()[rng.permutation(len(copy))]
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            copy[column] = pd.Categorical(copy[column], categories=frame[column].cat.categories)
    return copy


def permutation_importance(X: pd.DataFrame, features: list[str], predict: Predict, score: Score, *,
                           repeats: int, seed: int, deadline: float,
                           confidence: float = 0.95) -> PermutationImportance:
    """The drop of the score when one feature is shuffled, per feature, over `repeats` seeded shuffles.

    Repeats run as whole passes over every feature, so a pass cut by the deadline is dropped and
    every feature keeps the same number of shuffles (`repeats_done`, possibly 0).
    """
    baseline = score(*predict(X))
    # Several shuffled copies go to the model in one call: a framework behind a REST client (H2O)
    # pays its per-call overhead once per group, not once per feature.
    group = max(1, BATCH_ROWS // max(1, len(X)))
    drops: list[dict[str, float]] = []
    for repeat in range(repeats):
        rng = np.random.default_rng([seed, repeat])
        one_pass: dict[str, float] = {}
        for start in range(0, len(features), group):
            if time.monotonic() > deadline:
                break
            chosen = features[start:start + group]
            copies = [shuffled(X, [feature], rng) for feature in chosen]
            predictions, proba = predict(pd.concat(copies, ignore_index=True))
            for index, feature in enumerate(chosen):
                rows = slice(index * len(X), (index + 1) * len(X))
                part = None if proba is None else proba.iloc[rows].reset_index(drop=True)
                one_pass[feature] = baseline - score(np.asarray(predictions)[rows], part)
        if len(one_pass) < len(features):
            break
        drops.append(one_pass)
    return PermutationImportance(importance_table(pd.DataFrame(drops, columns=features), confidence),
                                 baseline, len(drops), repeats)


def importance_table(drops: pd.DataFrame, confidence: float = 0.95) -> pd.DataFrame:
    """Mean drop per feature, Student-t confidence interval over the repeats; rank 1 = most important."""
    from scipy import stats

    count = len(drops)
    mean = drops.mean() if count else pd.Series(np.nan, index=drops.columns)
    std = drops.std(ddof=1) if count >= 2 else pd.Series(np.nan, index=drops.columns)
    half = (stats.t.ppf(0.5 + confidence / 2, count - 1) * std / math.sqrt(count)) if count >= 2 else std
    table = pd.DataFrame({
        "feature": drops.columns, "importance_mean": mean.to_numpy(), "importance_std": std.to_numpy(),
        "ci_low": (mean - half).to_numpy(), "ci_high": (mean + half).to_numpy(), "repeats": count,
    })
    table["rank"] = table["importance_mean"].rank(ascending=False, method="min")
    return table.sort_values(["rank", "feature"], ignore_index=True)


def output_matrix(predictions: np.ndarray, proba: pd.DataFrame | None) -> np.ndarray:
    """What the fidelity gap is measured on: class probabilities, or the values (regression)."""
    if proba is not None:
        return proba.to_numpy(dtype=float)
    return np.asarray(predictions, dtype=float).reshape(-1, 1)


def prediction_gap(X: pd.DataFrame, perturbed_features: list[str], predict: Predict, *, seed: int,
                   draws: int, scale: float = 1.0) -> float:
    """Mean absolute change of the model's output when `perturbed_features` are resampled from other rows.

    For classification the change is the probability of the class each row was predicted as (as in
    OpenXAI's PGI/PGU); for regression the value's change divided by `scale` (the target's std),
    so datasets compare. Resampling keeps each feature's own distribution, categorical ones too.
    """
    if not perturbed_features:
        return float("nan")
    original = output_matrix(*predict(X))
    chosen = original.argmax(axis=1) if original.shape[1] > 1 else np.zeros(len(original), dtype=int)
    rows = np.arange(len(original))
    gaps = []
    for draw in range(draws):
        rng = np.random.default_rng([seed, 7919, draw])
        changed = output_matrix(*predict(shuffled(X, perturbed_features, rng)))
        gaps.append(np.abs(changed[rows, chosen] - original[rows, chosen]).mean() / scale)
    return float(np.mean(gaps))


def top_and_bottom(importance: pd.Series, k: int) -> tuple[list[str], list[str]]:
    """The k most and k least important features of an importance per feature (k at most half of them)."""
    k = max(1, min(k, len(importance) // 2))
    ordered = importance.sort_values(ascending=False, kind="stable")
    return list(ordered.index[:k]), list(ordered.index[-k:])
