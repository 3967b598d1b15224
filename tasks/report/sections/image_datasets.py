"""Image datasets: scores beside training throughput (figures embedded in the section)."""

from __future__ import annotations

from tasks.report import images
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    lines, figures = images.section(context.table, context.folder, context.markdown_table)
    return Section(lines=lines, shown=figures)


SECTION = ReportSection("images", 620, build)
