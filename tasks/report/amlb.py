"""Our job runs as AMLB's results.csv, so the AutoML Benchmark's own analysis notebooks read them.

AMLB conventions kept: `result` is higher-is-better and empty for a failed job, whose reason goes
to `info`; `metric` carries a `neg_` prefix when the raw metric is lower-is-better; `constraint`
is the budget name; the raw metric values follow as their own columns.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tasks.vocabulary import LOWER_IS_BETTER, RESULT, SCORE_METRICS

METRIC_COLUMNS: tuple[str, ...] = tuple(sorted({m for metrics in SCORE_METRICS.values() for m in metrics}))
AMLB_COLUMNS: tuple[str, ...] = (
    "id",
    "task",
    "framework",
    "constraint",
    "fold",
    "type",
    "result",
    "metric",
    "mode",
    "version",
    "params",
    "app_version",
    "utc",
    "duration",
    "training_duration",
    "predict_duration",
    "models_count",
    "seed",
    "info",
    *METRIC_COLUMNS,
)


def _column(jobs: pd.DataFrame, name: str) -> pd.Series:
    return jobs[name] if name in jobs else pd.Series([None] * len(jobs), index=jobs.index)


def _framework_params(jobs: pd.DataFrame) -> pd.Series:
    prefix = "params.param."
    columns = [c for c in jobs.columns if c.startswith(prefix)]
    records = jobs[columns].to_dict("records") if columns else [{} for _ in range(len(jobs))]
    return pd.Series(
        [
            json.dumps({k[len(prefix) :]: v for k, v in r.items() if pd.notna(v) and v != ""}, sort_keys=True)
            if r
            else ""
            for r in records
        ],
        index=jobs.index,
    )


def results_frame(jobs: pd.DataFrame) -> pd.DataFrame:
    """One AMLB row per job, exactly AMLB_COLUMNS in that order."""
    data_version = _column(jobs, "data_version").fillna("").astype(str)
    start = _column(jobs, "start_time")
    out = pd.DataFrame(
        {
            "id": [f"{d}@{v}" if v else d for d, v in zip(jobs["dataset"], data_version, strict=True)],
            "task": jobs["dataset"],
            "framework": jobs["framework"],
            "constraint": _column(jobs, "budget"),
            "fold": jobs["fold"],
            "type": jobs["problem_type"],
            "result": jobs[RESULT].where(jobs["ok"]),
            "metric": [f"neg_{m}" if m in LOWER_IS_BETTER else m for m in jobs["metric"]],
            "mode": "local",
            "version": _column(jobs, "framework_version"),
            "params": _framework_params(jobs),
            "app_version": _column(jobs, "app_version"),
            "utc": pd.to_datetime(start, utc=True).dt.strftime("%Y-%m-%dT%H:%M:%S")
            if start.notna().any()
            else "",
            "duration": _column(jobs, "duration_s"),
            "training_duration": _column(jobs, "fit_s"),
            "predict_duration": _column(jobs, "predict_s"),
            "models_count": _column(jobs, "models_count"),
            "seed": jobs["seed"],
            "info": _column(jobs, "error").fillna("").astype(str).str.replace("\n", " | ", regex=False),
        }
    )
    for metric in METRIC_COLUMNS:
        out[metric] = _column(jobs, metric)
    return out[list(AMLB_COLUMNS)].sort_values(["task", "framework", "fold", "seed"], ignore_index=True)


def write_results_csv(jobs: pd.DataFrame, path: Path) -> None:
    results_frame(jobs).to_csv(path, index=False)
