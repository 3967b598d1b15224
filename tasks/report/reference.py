"""This run beside published AMLB results: `automl-eval report SUITE --reference results.csv`.

The reference is a results.csv in AMLB's format (AMLB's published results, or this project's own
results.csv, which has the same columns). Each of this run's (task, framework, fold) rows is set
beside the published one: a task by its OpenML id where both sides have one (AMLB's `id` is
`openml.org/t/ID`; a card generated from an OpenML task knows its id), else by name; a framework by
AMLB's name mapped to this project's adapter (tasks/data/amlb_frameworks.py: RandomForest -> rf), the
adapter's environment version aside. A row AMLB did not publish is kept and marked `not published`;
one AMLB ran and failed, `failed there`. The metric is AMLB's higher-is-better convention on both
sides (`neg_logloss`; a raw lower-is-better `logloss` in the reference is negated to it), and a row
scored by another metric than the reference's is not compared. The difference is given in units of
the published fold spread (the std of the published `result` over the folds of that task and
framework), so "we reproduce AMLB" reads as |z| small on every row.
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

from tasks.data.amlb_frameworks import adapter_name, compared_adapter, not_compared  # noqa: E402
from tasks.errors import UserError  # noqa: E402
from tasks.specs import load_dataset_spec  # noqa: E402
from tasks.vocabulary import LOWER_IS_BETTER  # noqa: E402

REQUIRED = ("task", "framework", "fold", "result", "metric")
OPENML_ID = re.compile(r"(?:https?://)?(?:www\.)?openml\.org/t/([0-9]+)")
PUBLISHED, FAILED_THERE, NOT_PUBLISHED, OTHER_METRIC = (
    "published", "failed there", "not published", "other metric there"
)
COLUMNS = (
    "task",
    "framework",
    "fold",
    "metric",
    "result",
    "reference_framework",
    "reference",
    "reference_result",
    "difference",
    "reference_spread",
    "z",
)
SUMMARY_FILE = "reference_summary.csv"
FIX = ("give a results.csv in AMLB's format (tests/fixtures/amlb_per_fold_8c4h.csv is AMLB's published "
       "8c4h one)")


def read_reference(path: Path) -> pd.DataFrame:
    """An AMLB results.csv, or one sentence naming what is wrong with it and the fix."""
    if not path.is_file():
        raise UserError(f"--reference: {path} does not exist; {FIX}.")
    try:
        table = pd.read_csv(path, dtype={"task": str, "framework": str, "metric": str})
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError):
        raise UserError(f"--reference: {path} is not a CSV file; {FIX}.") from None
    missing = [column for column in REQUIRED if column not in table.columns]
    if missing:
        raise UserError(
            f"--reference: {path} has no column '{missing[0]}'; an AMLB results.csv has "
            f"{', '.join(REQUIRED)} among its columns."
        )
    if table.empty:
        raise UserError(f"--reference: {path} has no rows; {FIX}.")
    folds = pd.to_numeric(table["fold"], errors="coerce")
    results = pd.to_numeric(table["result"], errors="coerce")
    for column, bad in (
        ("fold", folds.isna() | (folds != folds.round())),
        ("result", results.isna() & table["result"].notna()),  # empty: a failed job, as AMLB writes it
        ("task", table["task"].isna()),
        ("framework", table["framework"].isna()),
        ("metric", table["metric"].isna()),
    ):
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0])
            raise UserError(
                f"--reference: {path}, line {row + 2}, column '{column}' holds "
                f"'{table[column].iloc[row]}'; AMLB writes a fold as a whole number, a result as a "
                "number (empty when the job failed), and names every task, framework and metric."
            )
    return table.assign(fold=folds.astype(int), result=results)


def higher_is_better(reference: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """The reference in AMLB's convention, which this project's results.csv follows: a lower-is-better
    metric as `neg_NAME` with its result negated. A row written raw (`logloss`, older AMLB files) is
    converted; `neg_NAME` and higher-is-better metrics are kept as they are."""
    metric = reference["metric"].astype(str)
    raw = metric.isin(LOWER_IS_BETTER)
    if not raw.any():
        return reference, []
    converted = reference.assign(
        metric=metric.where(~raw, "neg_" + metric),
        result=reference["result"].where(~raw, -reference["result"]),
    )
    names = ", ".join(sorted(set(metric[raw])))
    return converted, [f"{int(raw.sum())} reference rows scored by a lower-is-better metric written raw "
                       f"({names}) were negated to AMLB's neg_ form, as this run's are"]


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


def _published(reference: pd.DataFrame, task_ids: dict[str, int | None]) -> tuple[pd.DataFrame, list[str]]:
    """One published row per (task key, adapter, fold): result (empty where AMLB's job failed), metric,
    AMLB's framework name and the fold spread; and notes on what was left out or merged."""
    reference, notes = higher_is_better(reference)
    names = reference["framework"].astype(str)
    adapters = names.map(compared_adapter)
    if sentence := not_compared(names):
        notes.append(sentence)
    kept = reference.assign(key=_reference_keys(reference, task_ids), adapter=adapters)[adapters.notna()]
    cell = ["key", "adapter", "fold"]
    counts = kept.groupby(cell).size()
    if (counts > 1).any():
        # A file joining several AMLB runs, or naming one adapter twice (constantpredictor and its 2019
        # name constantpredictor_enc): each is AMLB's result for that fold, so their mean is the reference.
        constraints = sorted(set(kept["constraint"].astype(str))) if "constraint" in kept else []
        notes.append(
            f"{int((counts > 1).sum())} (task, framework, fold) are published more than once"
            + (f" (constraints {', '.join(constraints)})" if len(constraints) > 1 else "")
            + ": the mean of their results is the reference"
        )
    published = kept.groupby(cell, sort=False).agg(
        reference_result=("result", "mean"),
        reference_metric=("metric", "first"),
        reference_framework=("framework", lambda values: "/".join(sorted(set(values)))),
    ).reset_index()
    spread = published.groupby(["key", "adapter"])["reference_result"].std().rename("reference_spread")
    return published.join(spread, on=["key", "adapter"]), notes


def compare(ours: pd.DataFrame, reference: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Every (task, framework, fold) row of this run, beside the published result where there is one
    (`reference` says which: published, failed there, not published, other metric there), and notes."""
    task_ids: dict[str, int | None] = {}
    published, notes = _published(reference, task_ids)
    ours = ours.assign(
        key=[_task_key(str(task), task_ids) for task in ours["task"]],
        adapter=ours["framework"].astype(str).map(adapter_name),
    )
    joined = ours.merge(published, on=["key", "adapter", "fold"], how="left", indicator=True)
    found = joined["_merge"] == "both"
    other_metric = found & (joined["metric"] != joined["reference_metric"])
    if other_metric.any():
        mismatched = joined.loc[other_metric, ["task", "metric", "reference_metric"]]
        pairs = sorted({f"{t} ({m} here, {r} there)" for t, m, r in mismatched.itertuples(index=False)})
        notes.append(f"not compared, scored by another metric than the reference: {', '.join(pairs)}")
    status = np.select(
        [other_metric, found & joined["reference_result"].notna(), found],
        [OTHER_METRIC, PUBLISHED, FAILED_THERE],
        NOT_PUBLISHED,
    )
    compared = status == PUBLISHED
    joined = joined.assign(
        reference=status,
        reference_result=joined["reference_result"].where(compared),
        reference_spread=joined["reference_spread"].where(compared),
    )
    unpublished = sorted(set(joined.loc[status == NOT_PUBLISHED, "task"] + " x "
                             + joined.loc[status == NOT_PUBLISHED, "framework"]))
    if unpublished:
        notes.append(f"AMLB published no result for some or all folds of: {', '.join(unpublished)}")
    joined = joined.assign(difference=joined["result"] - joined["reference_result"])
    spread_values = joined["reference_spread"].where(joined["reference_spread"] > 0)
    joined = joined.assign(z=joined["difference"] / spread_values)
    return joined[list(COLUMNS)].sort_values(["task", "framework", "fold"], ignore_index=True), notes


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    """Per (task, framework): how many of this run's folds AMLB published, and over the folds both sides
    have a result for (a job failed here leaves its fold out) the mean result on each side, their
    difference and z. Where AMLB published none of them, `result` is the mean over this run's folds and
    the reference columns are empty."""
    published = rows[rows["reference"] == PUBLISHED]
    grouped = published[published["result"].notna()].groupby(["task", "framework"])
    matched = pd.DataFrame(
        {
            "reference_framework": grouped["reference_framework"].first(),
            "result": grouped["result"].mean(),
            "reference_result": grouped["reference_result"].mean(),
            "difference": grouped["difference"].mean(),
            "reference_spread": grouped["reference_spread"].first(),
            "mean_z": grouped["z"].mean(),
        }
    )
    every = rows.groupby(["task", "framework"])
    counts = pd.DataFrame(
        {"folds": every.size(), "published": published.groupby(["task", "framework"]).size()}
    )
    counts["published"] = counts["published"].fillna(0).astype(int)
    table = counts.join(matched)
    table["result"] = table["result"].fillna(every["result"].mean())
    table["published"] = [
        f"{p} of {n}" if p else NOT_PUBLISHED for p, n in zip(table["published"], table["folds"], strict=True)
    ]
    table["reference_framework"] = table["reference_framework"].fillna("")
    return table.drop(columns="folds").reset_index()


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
    """The report's section, reference.csv (per fold), reference_summary.csv and reference.png; `table`
    formats a frame as markdown."""
    rows, notes = compare(ours, reference)
    rows.to_csv(folder / "reference.csv", index=False)
    overview = summary(rows)
    overview.to_csv(folder / SUMMARY_FILE, index=False)
    lines = [
        "## Against the published results",
        "",
        f"This run's `result` beside {reference_name}'s, per task, framework and fold (reference.csv), "
        "both higher-is-better; means over the folds both sides have; z = difference / the published "
        "std over folds. `not published`: AMLB has no result for this task and framework.",
        "",
        table(overview),
        "",
    ]
    lines += [f"- {note}." for note in notes] + ([""] if notes else [])
    published = rows[rows["reference"] == PUBLISHED]
    return lines, [plot(published, folder / "reference.png")] if not published.empty else []
