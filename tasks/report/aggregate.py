"""One number per framework across datasets: normalized score, unweighted and weighted by dataset size.

Raw `result` mixes AUC, -logloss and -RMSE, so it is first normalized per dataset (0 = the
baseline, usually the constant predictor, 1 = the best framework on that dataset).
"""

from __future__ import annotations

import pandas as pd


def aggregate(
    normalized: pd.DataFrame, rank_table: pd.DataFrame, rows: pd.Series, imputed: pd.DataFrame
) -> pd.DataFrame:
    """framework, average rank, mean normalized score (unweighted and row-weighted), imputed cells."""
    weights = rows.reindex(normalized.index).fillna(1.0)
    weighted = normalized.mul(weights, axis=0).sum() / weights.sum()
    table = pd.DataFrame(
        {
            "average_rank": rank_table.mean(),
            "score": normalized.mean(),
            "score_weighted": weighted,
            "datasets": normalized.notna().sum(),
            "imputed_datasets": imputed.sum().reindex(normalized.columns).fillna(0).astype(int),
        }
    )
    table.index.name = "framework"
    return table.sort_values(["average_rank", "score"], ascending=[True, False]).reset_index()
