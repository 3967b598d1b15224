"""Cost/quality Pareto fronts: which frameworks no other framework beats on both score and cost."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.vocabulary import RESULT


def on_front(quality: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """True where no other point has quality >= and cost <=, with one of them strictly better."""
    quality, cost = np.asarray(quality, float), np.asarray(cost, float)
    front = np.ones(len(quality), dtype=bool)
    for i in range(len(quality)):
        if np.isnan(quality[i]) or np.isnan(cost[i]):
            front[i] = False
            continue
        better_or_equal = (quality >= quality[i]) & (cost <= cost[i])
        strictly = (quality > quality[i]) | (cost < cost[i])
        front[i] = not np.any(better_or_equal & strictly)
    return front


def per_dataset(jobs: pd.DataFrame, cost: str) -> pd.DataFrame:
    """dataset, framework, result (mean), cost (mean), on_front — successful jobs only."""
    ok = jobs[jobs["ok"]]
    points = ok.groupby(["dataset", "framework"], as_index=False).agg(
        result=(RESULT, "mean"), cost=(cost, "mean")
    )
    points["on_front"] = False
    for _, block in points.groupby("dataset"):
        points.loc[block.index, "on_front"] = on_front(block["result"].to_numpy(), block["cost"].to_numpy())
    points.insert(2, "cost_metric", cost)
    return points


def across_datasets(jobs: pd.DataFrame, normalized: pd.DataFrame, cost: str) -> pd.DataFrame:
    """framework, mean normalized score, geometric-mean cost over datasets, on_front."""
    ok = jobs[jobs["ok"]]
    costs = ok.groupby(["dataset", "framework"])[cost].mean().unstack("framework")
    positive = costs.where(costs > 0)
    geometric = np.exp(np.log(positive).mean())
    points = pd.DataFrame({"score": normalized.mean(), "cost": geometric}).dropna()
    points["on_front"] = on_front(points["score"].to_numpy(), points["cost"].to_numpy())
    points.index.name = "framework"
    points.insert(1, "cost_metric", cost)
    return points.reset_index()
