"""Per-dataset leaderboard: mean ± std over folds and seeds, failures by status, costs."""

from __future__ import annotations

import pandas as pd

from tasks.vocabulary import RESULT, STATUSES


def leaderboard(jobs: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, framework), best first within each dataset.

    Scores and costs come from successful jobs only; failures are counted by status. `rank` orders
    frameworks by mean `result` (frameworks without a result rank last).
    """
    ok = jobs[jobs["ok"]]
    group = ["dataset", "framework"]
    stats = ok.groupby(group).agg(
        metric=("metric", "first"),
        result_mean=(RESULT, "mean"),
        result_std=(RESULT, "std"),
        native_mean=("native", "mean"),
        native_std=("native", "std"),
        fit_s=("fit_s", "mean"),
        latency_p99_ms=("latency_p99_ms", "mean"),
        peak_rss_mb=("peak_rss_mb", "max"),
    )
    counts = jobs.groupby(group).agg(jobs=("status", "size"), metric_any=("metric", "first"))
    failures = pd.crosstab([jobs["dataset"], jobs["framework"]], jobs["status"])
    for status in STATUSES:
        if status != "ok" and status not in failures:
            failures[status] = 0
    failures = failures[[s for s in STATUSES if s != "ok"]]
    board = counts.join(stats, how="left").join(failures, how="left").fillna({s: 0 for s in failures})
    board["metric"] = board["metric"].fillna(board.pop("metric_any"))
    board["ok"] = board["jobs"] - failures.sum(axis=1).reindex(board.index).fillna(0)
    board = board.reset_index()
    board["rank"] = board.groupby("dataset")["result_mean"].rank(
        ascending=False, method="min", na_option="bottom"
    )
    columns = [
        "dataset",
        "rank",
        "framework",
        "metric",
        "result_mean",
        "result_std",
        "native_mean",
        "native_std",
        "jobs",
        "ok",
        *[s for s in STATUSES if s != "ok"],
        "fit_s",
        "latency_p99_ms",
        "peak_rss_mb",
    ]
    board = board[columns].sort_values(["dataset", "rank", "framework"], ignore_index=True)
    for column in ["rank", "jobs", "ok", *[s for s in STATUSES if s != "ok"]]:
        board[column] = board[column].astype(int)
    return board
