"""The leaderboard per dataset, and the per-job files in other tools' formats (AMLB, TabArena)."""

from __future__ import annotations

from tasks.report import amlb
from tasks.report.section import ReportContext, ReportSection, Section
from tasks.report.tabarena import tabarena_frame


def build(context: ReportContext) -> Section:
    folder = context.folder
    context.board.to_csv(folder / "leaderboard.csv", index=False)
    amlb.write_results_csv(context.table, folder / "results.csv")
    tabarena_frame(context.table).to_csv(folder / "tabarena.csv", index=False)
    return Section(
        lines=["## Leaderboard per dataset", "", context.markdown_table(context.board), ""],
        files=["- results.csv: AMLB results.csv format (one row per job)",
               "- tabarena.csv: TabArena's long format (one row per finished job: method, dataset, fold, "
               "metric_error, times)"])


SECTION = ReportSection("leaderboard", 300, build)
