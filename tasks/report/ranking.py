"""Across datasets: average rank, Friedman test, Nemenyi critical difference, win rates.

Demšar (2006): rank frameworks per dataset (1 = best, ties share the mean rank), test with
Friedman whether the average ranks differ at all, then call two frameworks different only when
their average ranks differ by more than the critical difference CD = q_alpha * sqrt(k(k+1)/(6N)).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


def ranks(scores: pd.DataFrame) -> pd.DataFrame:
    """dataset x framework ranks (1 = best), ties averaged; scores are higher-is-better."""
    return scores.rank(axis=1, ascending=False, method="average")


@dataclass(frozen=True)
class FriedmanResult:
    statistic: float  # chi-square with tie correction
    p_value: float
    iman_davenport_f: float  # the less conservative F form Demšar recommends
    iman_davenport_p: float
    datasets: int
    frameworks: int


def friedman(scores: pd.DataFrame) -> FriedmanResult | None:
    """Friedman's test: datasets are rows, frameworks columns; None below 2 datasets or 3 frameworks."""
    table = scores.dropna()
    n, k = table.shape
    if n < 2 or k < 3:
        return None
    rank_table = ranks(table).to_numpy()
    rank_sums = rank_table.sum(axis=0)
    chi2 = 12.0 / (n * k * (k + 1)) * np.sum(rank_sums**2) - 3.0 * n * (k + 1)
    # Ties: divide by 1 - sum(t^3 - t) / (n k (k^2 - 1)), t the size of each tie group in a row.
    ties = sum(((c**3 - c).sum()) for c in (np.unique(row, return_counts=True)[1] for row in rank_table))
    correction = 1.0 - ties / (n * k * (k * k - 1))
    chi2 = chi2 / correction if correction > 0 else 0.0
    p_value = float(stats.chi2.sf(chi2, k - 1))
    denominator = n * (k - 1) - chi2
    f_stat = (n - 1) * chi2 / denominator if denominator > 0 else float("inf")
    f_p = float(stats.f.sf(f_stat, k - 1, (k - 1) * (n - 1))) if np.isfinite(f_stat) else 0.0
    return FriedmanResult(float(chi2), p_value, float(f_stat), f_p, n, k)


def nemenyi_critical_difference(frameworks: int, datasets: int, alpha: float = 0.05) -> float:
    """Nemenyi's CD: the studentized range quantile (infinite df) over sqrt(2), times sqrt(k(k+1)/(6N))."""
    q_alpha = stats.studentized_range.ppf(1.0 - alpha, frameworks, np.inf) / np.sqrt(2.0)
    return float(q_alpha * np.sqrt(frameworks * (frameworks + 1) / (6.0 * datasets)))


def cliques(average_ranks: pd.Series, critical_difference: float) -> list[list[str]]:
    """Maximal groups of frameworks (by average rank) whose spread is within CD: the diagram's bars."""
    ordered = average_ranks.sort_values()
    names, values = list(ordered.index), ordered.to_numpy()
    groups: list[list[str]] = []
    for start in range(len(names)):
        end = start
        while end + 1 < len(names) and values[end + 1] - values[start] <= critical_difference:
            end += 1
        if end > start and not any(set(names[start : end + 1]) <= set(g) for g in groups):
            groups.append(names[start : end + 1])
    return groups


def win_rates(cells: pd.DataFrame) -> pd.DataFrame:
    """Share of (dataset, fold, seed) instances where the row framework beats the column one; ties: half."""
    table = cells.pivot_table(index=["dataset", "fold", "seed"], columns="framework", values="score")
    names = list(table.columns)
    values = table.to_numpy()
    matrix = pd.DataFrame(np.nan, index=names, columns=names)
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            if i == j:
                continue
            both = ~np.isnan(values[:, i]) & ~np.isnan(values[:, j])
            if both.any():
                wins = (values[both, i] > values[both, j]).sum() + 0.5 * (
                    values[both, i] == values[both, j]
                ).sum()
                matrix.loc[a, b] = wins / both.sum()
    return matrix
