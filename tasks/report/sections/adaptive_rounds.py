"""Adaptive suites (an `adaptive:` block): the rounds and what they dropped."""

from __future__ import annotations

from tasks.report import adaptive
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    return Section(lines=adaptive.section(context.table, context.inputs.adaptive_settings, context.folder,
                                          context.markdown_table, context.inputs.adaptive_reopened))


SECTION = ReportSection("adaptive", 600, build)
