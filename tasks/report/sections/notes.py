"""Notes: the sentences earlier sections left in the context (sampled fits, missing statistics)."""

from __future__ import annotations

from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    if not context.notes:
        return Section()
    return Section(lines=["## Notes", "", *[f"- {note}." for note in context.notes], ""])


SECTION = ReportSection("notes", 900, build)
