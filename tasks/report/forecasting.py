"""The report's forecasting part: OWA per framework per dataset, as in the M4 results table, and a
figure per dataset of a few series with each framework's forecast.

The OWA table is one row per framework (best mean first), one column per dataset plus the mean
over datasets, each cell the mean OWA over folds and seeds (< 1: better than Naive2); sMAPE and
MASE go to forecast_scores.csv beside it. The figures come from the jobs' predictions.csv (the
long format every forecasting job writes): the test window's truth and each framework's forecast,
fold 0, seed 0, the first few series by name.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: tasks/report/plots.py sets it
import pandas as pd

from tasks.metric_registry import default_metric, get_metric
from tasks.predictions import FORECAST_ID, FORECAST_TIME, PREDICTION, TRUTH
from tasks.report.plots import _colors, _save

# The M4 table's metric is the forecasting default (OWA); sMAPE and MASE are its two parts. Looked up
# in the metric registry, so a renamed or removed metric fails here, at import, not in a report.
OWA = default_metric("forecasting")
SMAPE, MASE = get_metric("smape").name, get_metric("mase").name
SERIES_SHOWN = 4


def owa_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """framework x dataset mean OWA (over folds and seeds) and its mean over datasets, best first."""
    ok = jobs[jobs["ok"] & (jobs["problem_type"] == "forecasting")]
    if ok.empty or OWA not in ok:
        return pd.DataFrame()
    values = ok.assign(**{OWA: pd.to_numeric(ok[OWA], errors="coerce")})
    table = values.pivot_table(index="framework", columns="dataset", values=OWA, aggfunc="mean")
    table["mean"] = table.mean(axis=1)
    best_first = table.sort_values("mean", ascending=get_metric(OWA).lower_is_better)
    return best_first.reset_index().rename_axis(columns=None)


def score_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """Mean sMAPE, MASE and OWA per dataset and framework (forecast_scores.csv)."""
    ok = jobs[jobs["ok"] & (jobs["problem_type"] == "forecasting")]
    present = [m for m in (SMAPE, MASE, OWA) if m in ok]
    if ok.empty or not present:
        return pd.DataFrame()
    numbers = ok[["dataset", "framework"]].join(ok[present].apply(pd.to_numeric, errors="coerce"))
    return numbers.groupby(["dataset", "framework"], as_index=False)[present].mean()


def plot_forecasts(predictions: pd.DataFrame, dataset: str, path: Path) -> Path:
    """The first SERIES_SHOWN series of `dataset` (fold 0, seed 0): truth and each framework's forecast."""
    rows = predictions[(predictions["dataset"] == dataset) & (predictions["fold"].astype(int) == 0)
                       & (predictions["seed"].astype(int) == 0)]
    shown = sorted(rows[FORECAST_ID].astype(str).unique())[:SERIES_SHOWN]
    frameworks = sorted(rows["framework"].unique())
    colors = _colors(frameworks)
    figure, axes = plt.subplots(1, len(shown), figsize=(4 * len(shown), 3.2), squeeze=False)
    for axis, series in zip(axes[0], shown, strict=True):
        part = rows[rows[FORECAST_ID].astype(str) == series].assign(
            **{FORECAST_TIME: lambda f: pd.to_datetime(f[FORECAST_TIME])})
        truth = part.drop_duplicates(FORECAST_TIME).sort_values(FORECAST_TIME)
        axis.plot(truth[FORECAST_TIME], truth[TRUTH], color="black", linewidth=2, label="truth")
        for framework in frameworks:
            forecast = part[part["framework"] == framework].sort_values(FORECAST_TIME)
            axis.plot(forecast[FORECAST_TIME], forecast[PREDICTION], color=colors[framework],
                      marker=".", label=framework)
            if {"q0.1", "q0.9"} <= set(forecast.columns) and forecast["q0.1"].notna().any():
                axis.fill_between(forecast[FORECAST_TIME], forecast["q0.1"], forecast["q0.9"],
                                  color=colors[framework], alpha=0.12)
        axis.set_title(f"{dataset}: {series}", fontsize=9)
        axis.tick_params(axis="x", labelrotation=45, labelsize=7)
    axes[0][0].legend(fontsize=7)
    return _save(figure, path)


def section(jobs: pd.DataFrame, predictions: pd.DataFrame | None, folder: Path,
            to_markdown: Callable[[pd.DataFrame], str]) -> tuple[list[str], list[Path]]:
    """The markdown lines and figures of the forecasting part; nothing when no job forecast."""
    owa = owa_table(jobs)
    if owa.empty:
        return [], []
    owa.to_csv(folder / "forecast_owa.csv", index=False)
    score_table(jobs).to_csv(folder / "forecast_scores.csv", index=False)
    figures = []
    if predictions is not None and not predictions.empty:
        for dataset in sorted(predictions["dataset"].unique()):
            figures.append(plot_forecasts(predictions, dataset, folder / f"forecasts_{dataset}.png"))
    lines = [
        "## Forecasting (M4's OWA)",
        "",
        "Mean OWA over folds and seeds: the mean of sMAPE and MASE each relative to Naive2 on the same "
        "fold (computed by the harness); below 1 beats Naive2. sMAPE and MASE: forecast_scores.csv.",
        "",
        to_markdown(owa),
        "",
        *[f"![{figure.stem}]({figure.name})" for figure in figures],
        "",
    ]
    return lines, figures
