"""The job table every report starts from: typed columns, the native metric, failures imputed.

AMLB's rule: a job that did not produce a result (failed, timeout, memory, or never recorded)
scores what the constant predictor scored on the same dataset and fold, so a framework that
fails is ranked as if it had guessed, never dropped. Imputed cells are marked.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tasks.evaluations.vocabulary import reported_figures
from tasks.vocabulary import RESULT

KEYS = ["dataset", "framework", "fold", "seed"]
COSTS = ["fit_s", "predict_s", "latency_p99_ms", "peak_rss_mb", "duration_s", "models_count"]
DEFAULT_BASELINE = "constant"
FORECAST_BASELINE = "naive2"


def prepare(runs: pd.DataFrame) -> pd.DataFrame:
    """Typed job table: one row per job run, numeric metrics, `native` = the suite metric's raw value."""
    jobs = runs.copy()
    for column in ("dataset", "framework", "status", "metric", "problem_type"):
        if column not in jobs:
            jobs[column] = ""
        jobs[column] = jobs[column].fillna("").astype(str)
    for column in ("fold", "seed"):
        source = jobs[column] if column in jobs else jobs.get(f"params.{column}")
        jobs[column] = (
            pd.to_numeric(source, errors="coerce").fillna(0).astype(int) if source is not None else 0
        )
    for column in [RESULT, *COSTS, "train_rows", "test_rows", "fit_rows"]:
        jobs[column] = pd.to_numeric(jobs[column], errors="coerce") if column in jobs else np.nan
    for column in reported_figures():  # the evaluations' figures the report reads, where recorded
        if column in jobs:
            jobs[column] = pd.to_numeric(jobs[column], errors="coerce")
    jobs["native"] = [
        pd.to_numeric(row.get(metric), errors="coerce") if metric in jobs.columns else np.nan
        for metric, row in zip(jobs["metric"], jobs.to_dict("records"), strict=True)
    ]
    jobs["ok"] = (jobs["status"] == "ok") & jobs[RESULT].notna()
    return jobs.reset_index(drop=True)


def baseline_of(jobs: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> str:
    """The baseline failures are imputed with and Elo is anchored at: the one asked for, except
    that a forecasting suite's default is Naive2 (OWA's reference; the constant predictor does not
    forecast)."""
    forecasting = (jobs["problem_type"] == "forecasting").all()
    if baseline == DEFAULT_BASELINE and forecasting and FORECAST_BASELINE in set(jobs["framework"]):
        return FORECAST_BASELINE
    return baseline


def sampled_fits(jobs: pd.DataFrame) -> list[str]:
    """Each framework and dataset whose ok jobs were fitted on a sample of the training rows (the
    framework's answer to a fold larger than its budget), with how many rows of how many."""
    sampled = jobs[jobs["ok"] & (jobs["fit_rows"] < jobs["train_rows"])]
    found = sampled.groupby(["framework", "dataset"])[["fit_rows", "train_rows"]].min()
    return [f"{framework} on {dataset}: {fit:,.0f} of {train:,.0f} rows"
            for (framework, dataset), (fit, train) in found.iterrows()]


def dataset_rows(jobs: pd.DataFrame) -> pd.Series:
    """Rows per dataset (train + test of a fold), the weight of the size-weighted aggregate."""
    rows = (jobs["train_rows"].fillna(0) + jobs["test_rows"].fillna(0)).groupby(jobs["dataset"]).max()
    return rows.where(rows > 0, 1.0)


def with_imputation(jobs: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """Every (dataset, framework, fold, seed) cell with `score` (imputed where missing) and `imputed`.

    The constant predictor's score of the same dataset and fold (mean over seeds) replaces a
    missing result; where the constant predictor has no result for that dataset, the worst
    result any framework reached on it does (the nearest stand-in for "no better than guessing").
    """
    frameworks = sorted(jobs["framework"].unique())
    cells = (
        jobs[["dataset", "fold", "seed"]]
        .drop_duplicates()
        .merge(pd.DataFrame({"framework": frameworks}), how="cross")
    )
    ok = jobs[jobs["ok"]]
    scores = ok.groupby(KEYS, as_index=False)[RESULT].mean()
    grid = cells.merge(scores, on=KEYS, how="left")
    constant = ok[ok["framework"] == baseline]
    by_fold = constant.groupby(["dataset", "fold"])[RESULT].mean().rename("constant_fold")
    by_dataset = constant.groupby("dataset")[RESULT].mean().rename("constant_dataset")
    worst = ok.groupby("dataset")[RESULT].min().rename("worst_dataset")
    grid = (
        grid.merge(by_fold, on=["dataset", "fold"], how="left")
        .merge(by_dataset, on="dataset", how="left")
        .merge(worst, on="dataset", how="left")
    )
    fallback = grid["constant_fold"].fillna(grid["constant_dataset"]).fillna(grid["worst_dataset"])
    grid["imputed"] = grid[RESULT].isna()
    grid["score"] = grid[RESULT].fillna(fallback)
    return grid[[*KEYS, "score", "imputed"]].sort_values(KEYS, ignore_index=True)


def task_scores(cells: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(dataset x framework mean score, dataset x framework 'any job imputed') from imputed cells."""
    scores = cells.pivot_table(index="dataset", columns="framework", values="score", aggfunc="mean")
    imputed = cells.pivot_table(index="dataset", columns="framework", values="imputed", aggfunc="max")
    return scores, imputed.astype(bool)


def spans(scores: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.Series:
    """Per dataset, the best framework's score minus the baseline's (or the worst framework's)."""
    floor = scores[baseline] if baseline in scores else scores.min(axis=1)
    return scores.max(axis=1) - floor


def normalized_scores(scores: pd.DataFrame, baseline: str = DEFAULT_BASELINE) -> pd.DataFrame:
    """Per dataset, 0 = the baseline (or the worst framework), 1 = the best: comparable across metrics."""
    floor = scores[baseline] if baseline in scores else scores.min(axis=1)
    top = scores.max(axis=1)
    span = (top - floor).where(lambda s: s > 0)
    return scores.sub(floor, axis=0).div(span, axis=0).fillna(0.0)
