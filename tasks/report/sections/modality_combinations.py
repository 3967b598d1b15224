"""Multimodal suites run each combination of streams as its own dataset BASE[STREAMS]: one table."""

from __future__ import annotations

from tasks.report.modality_table import modality_markdown, modality_table
from tasks.report.section import ReportContext, ReportSection, Section


def build(context: ReportContext) -> Section:
    modalities = modality_table(context.table)
    if modalities.empty:
        return Section()
    modalities.to_csv(context.folder / "modality.csv", index=False)
    return Section(
        lines=["## Modality combinations", "",
               "Mean over folds per combination of streams; * = on the Pareto front of score (up) and "
               "latency (down) within the dataset.", "", modality_markdown(modalities), ""],
        files=["- modality.csv: the modality combination table"])


SECTION = ReportSection("modality combinations", 400, build)
