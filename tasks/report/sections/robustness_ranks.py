"""Robustness: ranks on corrupted test folds (the robustness evaluation's figures and cases)."""

from __future__ import annotations

from tasks.report import robustness
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    robust = context.robust
    if robust is None:
        return Section()
    return Section(lines=robustness.markdown(robust, context.markdown_table, context.alpha),
                   figures=list(robust.figures))


SECTION = ReportSection("robustness", 500, build)
