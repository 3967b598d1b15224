"""Serving: the serving evaluation's load figures and the score-against-QPS front."""

from __future__ import annotations

from tasks.report import serving
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    lines, figures = serving.section(context.table, context.folder, context.markdown_table)
    return Section(lines=lines, figures=figures)


SECTION = ReportSection("serving", 700, build)
