"""Scaling: fit time or result against cores and GPUs (figure embedded in the section)."""

from __future__ import annotations

from tasks.report import scaling
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    lines, figures = scaling.section(context.table, context.folder, context.markdown_table)
    return Section(lines=lines, shown=figures)


SECTION = ReportSection("scaling", 730, build)
