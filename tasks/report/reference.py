"""This run beside published AMLB results: `automl-eval report SUITE --reference results.csv`.

The reference is a results.csv in AMLB's format (AMLB's published results, or this project's own
results.csv, which has the same columns). Rows are matched on (task, framework, fold): a task by
its OpenML id where both sides have one (AMLB's `id` is `openml.org/t/ID`; a card generated from an
OpenML task knows its id), else by name; a framework by AMLB's name mapped to this project's
adapter (RandomForest -> rf). The difference is given in units of the published fold spread (the
std of the published `result` over the folds of that task and framework), so "we reproduce AMLB"
reads as |z| small on every row.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, as tasks/report/plots.py

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from tasks.data.amlb_import import FRAMEWORKS  # noqa: E402
from tasks.errors import UserError  # noqa: E402
from tasks.specs import load_dataset_spec  # noqa: E402

REQUIRED = ("task", "framework", "fold", "result", "metric")
OPENML_ID = re.compile(r"(?:https?://)?(?:www\.)?openml\.org/t/([0-9]+)")
COLUMNS = (
    "task",
    "framework",
    "fold",
    "metric",
    "result",
    "reference_result",
    "difference",
    "reference_spread",
    "z",
)


def read_reference(path: Path) -> pd.DataFrame:
    """An AMLB results.csv, or one sentence naming what is wrong with it."""
    if not path.is_file():
        raise UserError(f"--reference: {path} does not exist; give an AMLB results.csv.")
    try:
        table = pd.read_csv(path)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        raise UserError(f"--reference: {path} is not a CSV file; give an AMLB results.csv.") from None
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise UserError(
            f"--reference: {path} has no column '{missing[0]}'; an AMLB results.csv has "
            f"{', '.join(REQUIRED)} among its columns."
        )
    return table


def openml_task_id(dataset: str) -> int | None:
    """The OpenML task a card was generated from, if any (its card may be gone: then None)."""
    try:
        return load_dataset_spec(dataset).source.openml_task
    except UserError:
        return None


def _task_key(task: str, task_ids: dict[str, int | None]) -> str:
    """`openml/t/ID` for a task whose card came from OpenML, else the task's name."""
    if task not in task_ids:
        task_ids[task] = openml_task_id(task)
    return f"openml/t/{task_ids[task]}" if task_ids[task] else task


def _reference_keys(reference: pd.DataFrame, task_ids: dict[str, int | None]) -> pd.Series:
    """AMLB's `id` (openml.org/t/ID) where it names an OpenML task; else the task as a card names it
    (this project's own results.csv, whose `id` is `dataset@version`)."""
    ids = reference["id"].astype(str) if "id" in reference else pd.Series("", index=reference.index)
    keys = [
        f"openml/t/{m.group(1)}" if (m := OPENML_ID.fullmatch(i)) else _task_key(str(t), task_ids)
        for i, t in zip(ids, reference["task"], strict=True)
    ]
    return pd.Series(keys, index=reference.index)


def compare(ours: pd.DataFrame, reference: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Per (task, framework, fold): this run's `result` beside the published one, and notes."""
    notes: list[str] = []
    task_ids: dict[str, int | None] = {}
    reference = reference.assign(
        key=_reference_keys(reference, task_ids),
        framework=reference["framework"].astype(str).map(lambda name: FRAMEWORKS.get(name, name)),
        fold=pd.to_numeric(reference["fold"], errors="coerce"),
        result=pd.to_numeric(reference["result"], errors="coerce"),
    )
    spread = reference.groupby(["key", "framework"])["result"].std().rename("reference_spread")
    reference = reference.join(spread, on=["key", "framework"])
    ours = ours.assign(key=[_task_key(str(task), task_ids) for task in ours["task"]])
    side = reference[["key", "framework", "fold", "metric", "result", "reference_spread"]].rename(
        columns={"metric": "reference_metric", "result": "reference_result"}
    )
    joined = ours.merge(side, on=["key", "framework", "fold"], how="inner")
    other_metric = joined["metric"] != joined["reference_metric"]
    if other_metric.any():
        mismatched = joined.loc[other_metric, ["task", "metric", "reference_metric"]]
        pairs = sorted({f"{t} ({m} here, {r} there)" for t, m, r in mismatched.itertuples(index=False)})
        notes.append(f"left out, scored with another metric than the reference: {', '.join(pairs)}")
        joined = joined[~other_metric]
    unmatched = sorted(
        set(ours["task"] + " x " + ours["framework"]) - set(joined["task"] + " x " + joined["framework"])
    )
    if unmatched:
        notes.append(f"no published result for: {', '.join(unmatched)}")
    joined = joined.assign(difference=joined["result"] - joined["reference_result"])
    spread_values = joined["reference_spread"].where(joined["reference_spread"] > 0)
    joined = joined.assign(z=joined["difference"] / spread_values)
    return joined[list(COLUMNS)].sort_values(["task", "framework", "fold"], ignore_index=True), notes


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (task, framework): folds matched, mean result on each side, mean difference and z."""
    grouped = rows.groupby(["task", "framework"])
    return pd.DataFrame(
        {
            "folds": grouped.size(),
            "result": grouped["result"].mean(),
            "reference_result": grouped["reference_result"].mean(),
            "difference": grouped["difference"].mean(),
            "reference_spread": grouped["reference_spread"].first(),
            "mean_z": grouped["z"].mean(),
        }
    ).reset_index()


def plot(rows: pd.DataFrame, path: Path) -> Path:
    """This run's result against the published one, one point per (task, framework, fold)."""
    figure, axes = plt.subplots(figsize=(5.5, 5))
    for framework, group in rows.groupby("framework"):
        axes.scatter(group["reference_result"], group["result"], label=str(framework), alpha=0.8, s=18)
    values = pd.concat([rows["result"], rows["reference_result"]]).dropna()
    if not values.empty:
        low, high = float(values.min()), float(values.max())
        pad = (high - low) * 0.05 or 0.05
        line = np.array([low - pad, high + pad])
        axes.plot(line, line, color="grey", linewidth=0.8, linestyle="--")
    axes.set_xlabel("published result (reference)")
    axes.set_ylabel("this run's result")
    axes.set_title("result per task, framework and fold (higher is better)")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def section(
    ours: pd.DataFrame, reference: pd.DataFrame, reference_name: str, folder: Path,
    table: Callable[[pd.DataFrame], str],
) -> tuple[list[str], list[Path]]:
    """The report's section, reference.csv and reference.png; `table` formats a frame as markdown."""
    rows, notes = compare(ours, reference)
    rows.to_csv(folder / "reference.csv", index=False)
    lines = [
        "## Against the published results",
        "",
        f"This run's `result` beside {reference_name}'s, per task, framework and fold (reference.csv); "
        "z = difference / the published std over folds.",
        "",
    ]
    if rows.empty:
        lines += ["No (task, framework, fold) of this run is in the reference.", ""]
        return lines + [f"- {note}." for note in notes] + [""], []
    lines += [table(summary(rows)), ""]
    lines += [f"- {note}." for note in notes] + ([""] if notes else [])
    return lines, [plot(rows, folder / "reference.png")]
