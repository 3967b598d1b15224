"""The report's Anytime part: per framework and dataset, the fit time until the job's score-over-time
curve had gained 95% and 99% of what the whole fit gained (tasks/anytime.py records them), and the
frameworks that expose no record of their search, listed as such (nothing is guessed for them),
and a figure per dataset of the curves themselves (each job's anytime.csv)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib.pyplot as plt  # the Agg backend: tasks/report/plots.py sets it
import pandas as pd

from tasks.report.plots import _colors, _save
from tasks.vocabulary import RESULT

FIGURES = ["anytime_t95_s", "anytime_t99_s", "fit_s"]


def table(jobs: pd.DataFrame) -> pd.DataFrame:
    """dataset, framework, mean anytime_t95_s, anytime_t99_s and fit_s, jobs with a curve."""
    if "anytime_t95_s" not in jobs:
        return pd.DataFrame()
    frame = jobs[jobs["status"] == "ok"].copy()
    for column in FIGURES:
        frame[column] = pd.to_numeric(frame.get(column), errors="coerce")
    frame = frame[frame["anytime_t95_s"].notna()]
    if frame.empty:
        return pd.DataFrame()
    grouped = frame.groupby(["dataset", "framework"])
    summary = grouped[FIGURES].mean().join(grouped.size().rename("jobs")).reset_index()
    summary["t95_share_of_fit"] = summary["anytime_t95_s"] / summary["fit_s"]
    return summary


def without_curve(jobs: pd.DataFrame) -> list[str]:
    """Frameworks whose ok jobs carry no curve, each with the reason its jobs give (anytime_reason:
    what the model said it does not expose), never a guess."""
    ok = jobs[jobs["status"] == "ok"]
    measured = pd.to_numeric(ok["anytime_t95_s"], errors="coerce") if "anytime_t95_s" in ok else None
    frameworks = set(ok["framework"])
    with_curve = set(ok.loc[measured.notna(), "framework"]) if measured is not None else set()
    listed = []
    for framework in sorted(frameworks - with_curve):
        rows = ok[ok["framework"] == framework]
        given = rows["anytime_reason"].dropna() if "anytime_reason" in rows else []
        reasons = sorted({str(reason) for reason in given if str(reason)})
        listed.append(f"{framework} ({'; '.join(reasons)})" if reasons else framework)
    return listed


def curves_figure(curves: pd.DataFrame, dataset: str, path: Path) -> Path:
    """One dataset's curves: result (test fold) against fit seconds, a step line per job, one colour
    per framework."""
    rows = curves[curves["dataset"] == dataset]
    frameworks = sorted(rows["framework"].astype(str).unique())
    colors = _colors(frameworks)
    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    jobs = rows.groupby(["framework", "fold", "seed"], sort=True, dropna=False)
    for (framework, _fold, _seed), job in jobs:
        job = job.sort_values("elapsed_s")
        axes.step(job["elapsed_s"], job[RESULT], where="post", color=colors[str(framework)], alpha=0.8,
                  marker="o", markersize=3)
    for framework in frameworks:
        axes.plot([], [], color=colors[framework], label=framework)
    axes.set_xlabel("fit seconds")
    axes.set_ylabel("result on the test fold (higher is better)")
    axes.set_title(f"Anytime: the framework's pick by its own validation score, {dataset}")
    axes.legend(fontsize=8, loc="lower right")
    axes.grid(alpha=0.3)
    return _save(figure, path)


def figures(curves: pd.DataFrame | None, folder: Path) -> list[Path]:
    """anytime_DATASET.png for each dataset with curves."""
    if curves is None or curves.empty:
        return []
    return [curves_figure(curves, dataset, folder / f"anytime_{re.sub(r'[^A-Za-z0-9_.-]', '_', dataset)}.png")
            for dataset in sorted(curves["dataset"].astype(str).unique())]


def section(jobs: pd.DataFrame, table_markdown: Callable[..., str]) -> list[str]:
    """The Anytime section of report.md: the table where jobs carry a curve, and the frameworks
    without one with their reasons (empty when no job recorded either)."""
    summary = table(jobs)
    reasons = jobs["anytime_reason"].fillna("").astype(str) if "anytime_reason" in jobs else pd.Series([""])
    if summary.empty and not (reasons != "").any():
        return []
    lines = ["## Anytime (score over time)", ""]
    if not summary.empty:
        lines += ["Fit seconds until the job's curve (the framework's pick by its own validation score, "
                  "scored on the test fold; anytime.csv on each job run) had gained 95% and 99% of what "
                  "the whole fit gained over its first model; means over folds and seeds. A t95 far below "
                  "fit_s says a shorter budget would have bought nearly the same result.", "",
                  table_markdown(summary), ""]
    missing = without_curve(jobs)
    if missing:
        lines += ["No curve (the framework exposes no record of its search's progress here, or says why): "
                  + ", ".join(missing) + ".", ""]
    return lines
