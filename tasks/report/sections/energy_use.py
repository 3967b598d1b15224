"""Energy: joules of the fit and per 1,000 predictions, where a source was readable."""

from __future__ import annotations

from tasks.report import energy
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    return Section(lines=energy.section(context.table, context.folder, context.markdown_table))


SECTION = ReportSection("energy", 710, build)
