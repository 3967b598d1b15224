"""Per-split results in TabArena's long format (tabarena.csv), to set beside TabArena's leaderboard.

TabArena's results tables hold one row per (method, dataset, fold) with the test error
(`metric_error`, lower is better: the metric itself when lower is better, 1 - score when higher),
the validation error, the metric's AutoGluon name, the problem type and the train and inference
times. The OpenML task id (`tid`) comes from the card when it was generated from an OpenML task.
A failed job has no error: TabArena leaves such splits out, and so does this table.
"""

from __future__ import annotations

import pandas as pd

from tasks.metric_registry import AUTOGLUON, get_metric, higher_is_better
from tasks.report.reference import openml_task_id

TABARENA_COLUMNS = (
    "method",
    "dataset",
    "tid",
    "repeat",
    "fold",
    "seed",
    "metric",
    "metric_error",
    "metric_error_val",
    "problem_type",
    "time_train_s",
    "time_infer_s",
)


def tabarena_frame(table: pd.DataFrame) -> pd.DataFrame:
    """One TabArena row per finished job of the report's job table (tasks/report/jobs.py prepare)."""
    done = table[table["ok"]]
    task_ids = {dataset: openml_task_id(dataset) for dataset in done["dataset"].unique()}
    rows = []
    for job in done.to_dict("records"):
        metric = str(job["metric"])
        value = job.get(metric)
        if value is None or pd.isna(value):
            continue
        rows.append(
            {
                "method": job["framework"],
                "dataset": job["dataset"],
                "tid": task_ids[job["dataset"]],
                "repeat": 0,  # the project's folds are one repeat (OpenML's first, for OpenML tasks)
                "fold": job["fold"],
                "seed": job["seed"],
                # TabArena names metrics as AutoGluon does (roc_auc, log_loss, rmse).
                "metric": get_metric(metric).framework_names.get(AUTOGLUON, metric),
                "metric_error": 1.0 - float(value) if higher_is_better(metric) else float(value),
                "metric_error_val": None,  # the harness scores the test fold only
                "problem_type": job["problem_type"],
                "time_train_s": job.get("fit_s"),
                "time_infer_s": job.get("predict_s"),
            }
        )
    frame = pd.DataFrame(rows, columns=list(TABARENA_COLUMNS))
    frame["tid"] = frame["tid"].astype("Int64")
    return frame.sort_values(["dataset", "method", "fold", "seed"], ignore_index=True)
