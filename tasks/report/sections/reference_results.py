"""This run beside a published AMLB results.csv (`automl-eval report --reference`)."""

from __future__ import annotations

from tasks.report import amlb
from tasks.report.reference import section as reference_section
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    if context.inputs.reference is None:
        return Section()
    name, published = context.inputs.reference
    lines, figures = reference_section(amlb.results_frame(context.table), published, name, context.folder,
                                       context.markdown_table)
    return Section(lines=lines, figures=figures)


SECTION = ReportSection("reference", 550, build)
