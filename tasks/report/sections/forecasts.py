"""Forecasting datasets: OWA against Naive2 and the forecast figures (embedded in the section)."""

from __future__ import annotations

from tasks.report import forecasting
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    lines, figures = forecasting.section(context.table, context.inputs.forecasts, context.folder,
                                         context.markdown_table)
    return Section(lines=lines, shown=figures)


SECTION = ReportSection("forecasting", 610, build)
