"""The diagnosis of `compare` for a person: its table rows, compare.md and the aligned-series plots."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from tasks.report import plots
from tasks.report import series as job_series
from tasks.report.compare import Comparison
from tasks.vocabulary import RESULT


def _fmt(value: object) -> str:
    if isinstance(value, float | np.floating):
        return "" if pd.isna(value) else f"{value:.4g}"
    return str(value)


def diagnostic_rows(comparison: Comparison, *, every_metric: bool = False) -> pd.DataFrame:
    """The seed's table: metric | current | baseline | change | main factor (dataset/framework in front).

    `result` is shown for every cell; costs only where they regressed or stand out of the noise,
    unless every_metric.
    """
    table = comparison.table
    if not every_metric:
        notable = table["regression"] | (table["z"].abs() >= comparison.thresholds.z)
        table = table[(table["metric"] == RESULT) | notable]
    out = pd.DataFrame(
        {
            "dataset / framework": table["dataset"] + " / " + table["framework"],
            "metric": table["metric"],
            "current": table["current"],
            "baseline": table["baseline"],
            "change": [
                f"{c:+.4g} ({p:+.1f}%)" if pd.notna(c) else "all jobs failed"
                for c, p in zip(table["change"], table["change_pct"], strict=True)
            ],
            "z": table["z"],
            "regression": table["regression"].map({True: "REGRESSION", False: ""}),
            "main factor": table["main factor"],
            "differing factors": table["differing factors"],
            "where": table["where"],
        }
    )
    return out.reset_index(drop=True)


def top_regressions(comparison: Comparison, count: int = 3) -> list[tuple[str, str]]:
    """The cells of the `count` worst regressions (largest |z|, then relative change) that have series."""
    flagged = comparison.regressions.copy()
    flagged["_size"] = flagged["z"].abs().fillna(np.inf)
    flagged["_relative"] = flagged["change_pct"].abs().fillna(np.inf)
    cells: list[tuple[str, str]] = []
    for row in flagged.sort_values(["_size", "_relative"], ascending=False).itertuples(index=False):
        cell = (str(row.dataset), str(row.framework))
        if cell not in cells and comparison.alignments.get(cell):
            cells.append(cell)
    return cells[:count]


def write_folder(comparison: Comparison, folder: Path, base_label: str, cand_label: str) -> Path:
    """compare.csv, compare.md and, for the top 3 regressions, their aligned series as small PNGs."""
    folder.mkdir(parents=True, exist_ok=True)
    comparison.table.to_csv(folder / "compare.csv", index=False)
    figures = []
    for rank, (dataset, framework) in enumerate(top_regressions(comparison), start=1):
        for alignment in comparison.alignments[(dataset, framework)]:
            path = folder / f"series_{rank}_{alignment.column}.png"
            title = f"{dataset} / {framework}: {alignment.label}"
            plots.aligned_series(alignment, path, title=title, base_label="baseline", cand_label="current")
            figures.append((title, path.name, job_series.describe(alignment, comparison.thresholds.cost)))
    text = markdown(comparison, base_label, cand_label, figures)
    (folder / "compare.md").write_text(text, encoding="utf-8")
    return folder


def markdown(
    comparison: Comparison, base_label: str, cand_label: str, figures: Iterable[tuple[str, str, str]] = ()
) -> str:
    """The diagnosis as a page; `figures` are (title, file name, caption) of plots beside it."""
    rows = diagnostic_rows(comparison)
    count = int(comparison.table["regression"].sum())
    thresholds = comparison.thresholds
    lines = [
        f"# Regression diagnosis: {cand_label} (current) vs {base_label} (baseline)",
        "",
        f"**{count} regression(s)**. A regression is a change the wrong way beyond "
        f"{thresholds.result:.0%} (result) or {thresholds.cost:.0%} (costs) AND |z| >= {thresholds.z:g} "
        "against the baseline's fold/seed spread.",
        "",
    ]
    table = comparison.table
    unmeasured = int((table["z"].isna() & table["current"].notna()).sum()) if len(table) else 0
    if unmeasured:
        lines += [f"No noise estimate for {unmeasured} figure(s): the baseline has a single run per "
                  "cell and no cell with two, so the threshold alone decides them. Run more seeds "
                  "or folds to test a change against the noise.", ""]
    if comparison.unmatched:
        lines += ["Not compared: " + "; ".join(comparison.unmatched) + ".", ""]
    if rows.empty:
        lines.append("Nothing in common to compare.")
    else:
        lines += ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
        lines += [
            "| " + " | ".join(_fmt(v).replace("|", "/") for v in row) + " |"
            for row in rows.itertuples(index=False)
        ]
    figures = list(figures)
    if figures:
        lines += ["", "## Where the top regressions happened (series aligned by DTW)", ""]
        for title, name, caption in figures:
            lines += [f"**{title}**: {caption}", "", f"![{title}]({name})", ""]
    return "\n".join(lines) + "\n"
