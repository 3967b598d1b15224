"""How much a framework's score moves between seeds and folds, and across datasets.

The coefficient of variation (std / |mean|) is reported, but frameworks are flagged on the
*spread*: the std of `result` as a share of the dataset's span from the baseline to the best
framework. CV misleads where `result` sits near zero (a log loss of 0.04, an R² near 0), and the
span says how much of the difference between frameworks the noise could swallow.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.vocabulary import RESULT

DEFAULT_SPREAD_THRESHOLD = 0.10  # std over folds x seeds above 10% of the baseline-to-best span


def per_dataset(
    jobs: pd.DataFrame, spans: pd.Series, threshold: float = DEFAULT_SPREAD_THRESHOLD
) -> pd.DataFrame:
    """dataset, framework, runs, mean, std, cv, seed_std (within folds), spread (std / span), flagged."""
    ok = jobs[jobs["ok"]]
    overall = ok.groupby(["dataset", "framework"])[RESULT].agg(runs="size", mean="mean", std="std")
    within_fold = (
        ok.groupby(["dataset", "framework", "fold"])[RESULT].std().groupby(["dataset", "framework"]).mean()
    )
    table = overall.join(within_fold.rename("seed_std")).reset_index()
    table["cv"] = table["std"] / table["mean"].abs().where(lambda s: s > 0)
    span = table["dataset"].map(spans).where(lambda s: s > 0)
    table["spread"] = table["std"] / span
    table["flagged"] = table["spread"].fillna(0.0) > threshold
    return table


def per_framework(
    table: pd.DataFrame, normalized: pd.DataFrame, threshold: float = DEFAULT_SPREAD_THRESHOLD
) -> pd.DataFrame:
    """framework: mean cv, mean/max spread, std of the normalized score across datasets, flagged."""
    summary = table.groupby("framework").agg(
        mean_cv=("cv", "mean"),
        mean_spread=("spread", "mean"),
        max_spread=("spread", "max"),
        mean_seed_std=("seed_std", "mean"),
        flagged_datasets=("flagged", "sum"),
    )
    summary["across_datasets_std"] = normalized.std().reindex(summary.index)
    summary["flagged"] = summary["max_spread"].fillna(0.0) > threshold
    summary["flagged_datasets"] = summary["flagged_datasets"].astype(int)
    return summary.reset_index().replace({np.inf: np.nan})
