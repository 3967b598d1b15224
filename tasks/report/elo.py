"""Elo ratings from pairwise battles: Bradley-Terry by maximum likelihood, bootstrap intervals.

Every (dataset, fold, seed) instance is a tournament: each pair of frameworks plays once, the
higher score wins, equal scores split the point. Bradley-Terry says P(i beats j) =
g_i / (g_i + g_j); its maximum-likelihood strengths come from Newton's method. On the
Elo scale, r = 400 log10(g), shifted so the anchor framework scores 1000. Intervals resample whole
datasets (the independent units), as TabArena does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

ELO_SCALE = 400.0
ANCHOR_RATING = 1000.0
# A half-point tie added to every pair keeps the estimate finite when one framework wins every
# battle (the maximum-likelihood strength would be infinite); it is negligible next to real battles.
PRIOR_TIES = 0.5


def win_counts(cells: pd.DataFrame) -> tuple[list[str], dict[str, np.ndarray]]:
    """Per dataset, a k x k matrix of points the row framework won against the column one."""
    table = cells.pivot_table(index=["dataset", "fold", "seed"], columns="framework", values="score")
    names = list(table.columns)
    per_dataset: dict[str, np.ndarray] = {}
    for dataset, block in table.groupby(level="dataset"):
        values = block.to_numpy()
        a, b = values[:, :, None], values[:, None, :]
        played = ~np.isnan(a) & ~np.isnan(b)
        points = np.where(played, (a > b) + 0.5 * (a == b), 0.0).sum(axis=0)
        np.fill_diagonal(points, 0.0)
        per_dataset[str(dataset)] = points
    return names, per_dataset


def bradley_terry(wins: np.ndarray, *, iterations: int = 100, tolerance: float = 1e-10) -> np.ndarray:
    """Maximum-likelihood strengths (geometric mean 1) from a matrix of points won, row over column.

    Newton's method on the log-strengths (the log-likelihood is concave; the first strength is held
    at 0 to fix the scale's origin) converges in a few steps where the classic MM iteration needs
    thousands when strengths are far apart.
    """
    k = wins.shape[0]
    wins = wins + PRIOR_TIES * (1.0 - np.eye(k))
    games = wins + wins.T
    total_wins = wins.sum(axis=1)
    theta = np.zeros(k)
    for _ in range(iterations):
        p_win = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))  # P(row beats column)
        gradient = total_wins - (games * p_win).sum(axis=1)
        curvature = games * p_win * (1.0 - p_win)
        hessian = curvature - np.diag(curvature.sum(axis=1))
        # Capped steps keep the first iterations sane when one framework wins nearly everything.
        step = np.clip(np.linalg.solve(hessian[1:, 1:], -gradient[1:]), -4.0, 4.0)
        theta[1:] += step
        if np.max(np.abs(step)) < tolerance:
            break
    theta -= theta.mean()
    return np.exp(theta)


def to_elo(strength: np.ndarray, anchor_index: int) -> np.ndarray:
    rating = ELO_SCALE * np.log10(strength)
    return rating - rating[anchor_index] + ANCHOR_RATING


@dataclass(frozen=True)
class EloTable:
    ratings: pd.DataFrame  # framework, elo, ci_low, ci_high, sorted best first
    anchor: str
    rounds: int


def elo_ratings(cells: pd.DataFrame, *, anchor: str, rounds: int = 200, seed: int = 0) -> EloTable:
    """Elo with 95% percentile bootstrap intervals; `anchor` must be one of the frameworks."""
    names, per_dataset = win_counts(cells)
    anchor_index = names.index(anchor)
    stacked = np.stack(list(per_dataset.values()))
    point = to_elo(bradley_terry(stacked.sum(axis=0)), anchor_index)
    rng = np.random.default_rng(seed)
    samples = np.empty((rounds, len(names)))
    for round_index in range(rounds):
        chosen = rng.integers(0, len(stacked), size=len(stacked))
        samples[round_index] = to_elo(bradley_terry(stacked[chosen].sum(axis=0)), anchor_index)
    low, high = np.percentile(samples, [2.5, 97.5], axis=0)
    ratings = pd.DataFrame({"framework": names, "elo": point, "ci_low": low, "ci_high": high})
    return EloTable(ratings.sort_values("elo", ascending=False, ignore_index=True), anchor, rounds)
