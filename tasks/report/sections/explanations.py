"""Explanations and deployability: feature importance, SHAP and the exports."""

from __future__ import annotations

from tasks.report.explanations import section as explain_section
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    lines, figures = explain_section(context.table, context.inputs.explanations, context.folder)
    return Section(lines=lines, figures=figures)


SECTION = ReportSection("explanations", 950, build)
