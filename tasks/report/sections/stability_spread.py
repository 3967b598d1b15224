"""Stability: each framework's spread of `result` over folds and seeds, flagged above a threshold."""

from __future__ import annotations

from tasks.report import plots
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    steady, summary, flags = context.steady, context.steady_summary, context.flags
    section = Section()
    if steady["spread"].notna().any():
        section.figures.append(plots.stability(steady, context.spread_threshold,
                                               context.folder / "stability.png"))
    steady.to_csv(context.folder / "stability.csv", index=False)
    summary.to_csv(context.folder / "stability_frameworks.csv", index=False)
    section.lines = [
        "## Stability",
        "",
        "Spread = std of `result` over folds and seeds as a share of the dataset's baseline-to-best span "
        f"(cv = std / |mean| alongside); flagged above {context.spread_threshold:.0%}: "
        + (", ".join(flags) if flags else "none")
        + ".",
        "",
        context.markdown_table(summary),
        "",
    ]
    return section


SECTION = ReportSection("stability", 200, build)
