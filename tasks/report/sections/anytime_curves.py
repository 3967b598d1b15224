"""Anytime: the score over fit time, where frameworks record their search's progress."""

from __future__ import annotations

from tasks.report import anytime
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    return Section(lines=anytime.section(context.table, context.markdown_table),
                   figures=anytime.figures(context.inputs.anytime_curves, context.folder))


SECTION = ReportSection("anytime", 720, build)
