"""The report's energy part: joules of the fit and per 1,000 predictions, per framework and dataset,
each with its source (tasks/energy.py records them; a job without a readable source has none, and
the section says why instead of showing an estimate)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

FIGURES = ["energy_fit_j", "energy_predict_per_1k_j"]


def table(jobs: pd.DataFrame) -> pd.DataFrame:
    """dataset, framework, source, mean joules of the fit and per 1,000 predictions, jobs measured."""
    if not any(column in jobs for column in FIGURES):
        return pd.DataFrame()
    frame = jobs[jobs["status"] == "ok"].copy()
    for column in FIGURES:
        frame[column] = pd.to_numeric(frame[column], errors="coerce") if column in frame else float("nan")
    frame = frame[frame["energy_fit_j"].notna()]
    if frame.empty:
        return pd.DataFrame()
    frame["source"] = frame.get("energy_source", "unknown")
    grouped = frame.groupby(["dataset", "framework", "source"])
    summary = grouped[FIGURES].mean().join(grouped.size().rename("jobs")).reset_index()
    return summary.sort_values(["dataset", "energy_fit_j"]).reset_index(drop=True)


def missing_reasons(jobs: pd.DataFrame) -> list[str]:
    """Why jobs have no energy figure, each reason once."""
    if "energy_reason" not in jobs:
        return []
    measured = pd.to_numeric(jobs.get("energy_fit_j"), errors="coerce") if "energy_fit_j" in jobs else None
    rows = jobs if measured is None else jobs[measured.isna()]
    return sorted({str(reason) for reason in rows["energy_reason"].dropna() if str(reason)})


def section(jobs: pd.DataFrame, folder: object, table_markdown: Callable[..., str]) -> list[str]:
    """The Energy section of report.md: what was measured, and what this machine could not measure."""
    if "energy_source" not in jobs and not any(column in jobs for column in FIGURES):
        return []
    summary = table(jobs)
    lines = ["## Energy", ""]
    if not summary.empty:
        lines += ["Joules of the fit and per 1,000 test-fold predictions, means over folds and seeds; "
                  "source: nvml_counter (GPU energy counter), nvml_power (GPU power x time), rapl (CPU "
                  "package counter: the whole package, other processes included).", "",
                  table_markdown(summary), ""]
    reasons = missing_reasons(jobs)
    if reasons:
        lines += ["Not measured" + (" for the other jobs" if not summary.empty else "")
                  + " (no figure is estimated): " + "; ".join(reasons) + ".", ""]
    return lines
