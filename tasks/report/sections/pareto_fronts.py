"""Pareto fronts of normalized score against each cost (figures and pareto.csv, no text)."""

from __future__ import annotations

import pandas as pd

from tasks.report import pareto, plots
from tasks.report.section import ReportContext, ReportSection, Section

PARETO_COSTS = ("fit_s", "latency_p99_ms")


def build(context: ReportContext) -> Section:
    table, folder = context.table, context.folder
    section = Section()
    fronts = []
    metrics = table.groupby("dataset")["metric"].first().to_dict()
    for cost in PARETO_COSTS:
        if table.loc[table["ok"], cost].notna().any():
            overall = pareto.across_datasets(table, context.normalized, cost)
            local = pareto.per_dataset(table, cost)
            section.figures.append(plots.pareto_overall(overall, cost, folder / f"pareto_{cost}.png"))
            section.figures.append(
                plots.pareto_per_dataset(local, metrics, cost, folder / f"pareto_{cost}_per_dataset.png"))
            fronts.append(overall.assign(dataset="(all, normalized)").rename(columns={"score": "result"}))
            fronts.append(local)
    if fronts:
        pd.concat(fronts, ignore_index=True).to_csv(folder / "pareto.csv", index=False)
    return section


SECTION = ReportSection("pareto fronts", 150, build)
