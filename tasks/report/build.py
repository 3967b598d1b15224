"""The report folder: every table as CSV, the figures as PNG, report.md that ties them together,
and report.html, the same page with its figures embedded (MLflow's artifact viewer renders it).

The sections are plug-ins (tasks/report/section.py, one module each in tasks/report/sections/):
this module builds the context, asks each section in order for its part, lists their files and
figures under "## Files" and writes the pages.
"""

from __future__ import annotations

import base64
import html
import re
import tempfile
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

import pandas as pd

from tasks import paths
from tasks.adaptive import Cell
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.report import amlb, jobs, leaderboard, ranking, robustness, stability
from tasks.report.explanations import ExplanationInputs
from tasks.report.explanations import load_inputs as load_explanations
from tasks.report.markdown import markdown_table
from tasks.report.section import ReportContext, ReportInputs, Section, ordered_sections
from tasks.specs import AdaptiveSettings, load_suite
from tasks.tracking import read
from tasks.tracking.adaptive_record import recorded_adaptive

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
_IMAGE = re.compile(r"!\[(?P<alt>[^\]]*)\]\((?P<src>[^)\s]+)\)")
_STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    "table{border-collapse:collapse;margin:1em 0;font-size:14px}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}th{background:#f3f3f3}"
    "img{max-width:100%;border:1px solid #eee}li{margin:.3em 0}"
)


@dataclass
class Report:
    folder: Path
    markdown: str
    leaderboard: pd.DataFrame
    aggregate: pd.DataFrame
    elo: pd.DataFrame | None
    friedman: ranking.FriedmanResult | None
    critical_difference: float | None
    stability_flags: list[str]
    figures: list[Path] = field(default_factory=list)
    anchor: str = ""
    robustness: robustness.RobustnessReport | None = None


class ReportOptions(TypedDict, total=False):
    """What a user may set on a report (`automl-eval report`'s options), as build_report takes it."""

    baseline: str
    spread_threshold: float
    bootstrap_rounds: int
    alpha: float
    reference: tuple[str, pd.DataFrame] | None


def build_report(
    runs: pd.DataFrame,
    folder: Path,
    *,
    title: str,
    baseline: str = jobs.DEFAULT_BASELINE,
    spread_threshold: float = stability.DEFAULT_SPREAD_THRESHOLD,
    bootstrap_rounds: int = 200,
    alpha: float = 0.05,
    robustness_cases: pd.DataFrame | None = None,
    explanations: ExplanationInputs | None = None,
    forecasts: pd.DataFrame | None = None,
    reference: tuple[str, pd.DataFrame] | None = None,
    anytime_curves: pd.DataFrame | None = None,
    adaptive_settings: AdaptiveSettings | None = None,
    adaptive_reopened: Collection[Cell] = (),
) -> Report:
    """Compute every table and figure from job runs and write them under `folder`.

    `reference`: (its file name, a published AMLB results.csv) to set this run beside.

    `robustness_cases`: the robustness evaluation's per-case tables of these runs (for its curves);
    `forecasts`: forecasting jobs' predictions (for the forecast figures);
    `anytime_curves`: the jobs' anytime.csv, stacked (for the score-over-time figures);
    `adaptive_settings`: the `adaptive:` settings the execution ran its rounds with (its section);
    `adaptive_reopened`: the cells it reopened for a regression since the previous execution.
    """
    if runs.empty:
        raise UserError(f"no job runs to report on for {title}; check the suite name, run id or filter.")
    folder.mkdir(parents=True, exist_ok=True)
    table = jobs.prepare(runs)
    baseline = jobs.baseline_of(table, baseline)
    if not table["ok"].any():
        return _failures_only(table, folder, title)
    inputs = ReportInputs(robustness_cases, explanations, forecasts, reference, anytime_curves,
                          adaptive_settings, adaptive_reopened)
    context = ReportContext(title, table, folder, baseline, spread_threshold, bootstrap_rounds, alpha, inputs)
    sections = [plugin.build(context) for plugin in ordered_sections()]
    markdown = _markdown(title, sections)
    write_report_pages(folder, markdown, title)
    figures = [path for section in sections for path in [*section.figures, *section.shown]]
    return Report(folder, markdown, context.board, context.totals, context.elo_table, context.friedman,
                  context.critical_difference, context.flags, figures, context.anchor, context.robust)


def _markdown(title: str, sections: list[Section]) -> str:
    """The title, each section's lines in order, then "## Files": the tables the sections wrote and
    the figures they list."""
    listed = [path for section in sections for path in section.figures]
    lines = [f"# Report: {title}", ""]
    for section in sections:
        lines += section.lines
    lines += [
        "## Files",
        "",
        *[line for section in sections for line in section.files],
        *(["- report.html: this page with the figures embedded"] if listed else []),
        *[f"- ![{p.stem}]({p.name})" for p in listed],
        "",
    ]
    return "\n".join(lines)


def write_report_pages(folder: Path, markdown: str, title: str) -> None:
    """report.md as written, and report.html: one file, its figures inlined as data URIs, so it
    reads the same from MLflow's artifact viewer, a mail attachment or a browser on disk."""
    (folder / REPORT_MD).write_text(markdown, encoding="utf-8")
    (folder / REPORT_HTML).write_text(report_html(markdown, folder, title), encoding="utf-8")


def report_html(markdown: str, folder: Path, title: str) -> str:
    import mistune

    def inline(match: re.Match[str]) -> str:
        image = folder / match["src"]
        if not image.is_file() or image.parent.resolve() != folder.resolve():
            return match[0]  # not one of this report's figures: left as written
        data = base64.b64encode(image.read_bytes()).decode("ascii")
        return f"![{match['alt']}](data:image/png;base64,{data})"

    body = mistune.create_markdown(plugins=["table"])(_IMAGE.sub(inline, markdown))
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{_STYLE}</style></head><body>\n{body}</body></html>\n")


def without_images(markdown: str) -> str:
    """The markdown with its figure links dropped: where relative links cannot load (Prefect)."""
    lines = [line for line in markdown.splitlines() if not _IMAGE.fullmatch(line.strip().removeprefix("- "))]
    return "\n".join(lines) + "\n"


def _failures_only(table: pd.DataFrame, folder: Path, title: str) -> Report:
    """No job produced a result: the leaderboard (failures by status) and results.csv, no statistics."""
    board = leaderboard.leaderboard(table)
    board.to_csv(folder / "leaderboard.csv", index=False)
    amlb.write_results_csv(table, folder / "results.csv")
    markdown = "\n".join(
        [f"# Report: {title}", "", "No job produced a result; failures by status:", "", markdown_table(board),
         ""]
    )
    write_report_pages(folder, markdown, title)
    return Report(folder, markdown, board, pd.DataFrame(), None, None, None, [])


# ---------------------------------------------------------------- from the MLflow store


def default_folder(label: str) -> Path:
    cleaned = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in label).strip("-")
    return paths.reports_dir() / (cleaned or "report")


def _adaptive_settings(parent: dict[str, Any]) -> tuple[AdaptiveSettings | None, set[Cell]]:
    """The `adaptive:` settings and reopened cells the execution recorded; for an execution recorded
    before it kept them, its suite's block from the file here (None without one, or without the
    file: a report built where the suite is not, e.g. from another team's store)."""
    settings, reopened = recorded_adaptive(parent)
    if settings is not None:
        return settings, reopened
    try:
        return load_suite(parent.get("suite") or "suite", all_evaluations()).adaptive, set()
    except UserError:
        return None, set()


def report_execution(
    execution_id: str,
    *,
    folder: Path | None = None,
    uri: str | None = None,
    log_to_mlflow: bool = True,
    **options: Unpack[ReportOptions],
) -> Report:
    """Report on one suite execution from MLflow, and attach the folder to its parent run (`report/`)."""
    parent = read.execution(execution_id, uri=uri)
    suite = parent.get("suite") or "suite"
    runs = read.job_runs(execution_id=execution_id, uri=uri)
    title = f"{suite}, execution {execution_id}"
    cases = read.evaluation_tables(runs, "robustness", "cases.csv", uri=uri)
    forecasts = read.forecast_predictions(runs, uri=uri)
    curves = read.anytime_curves(runs, uri=uri)
    folder = folder or default_folder(f"{suite}-{execution_id[:8]}")
    settings, reopened = _adaptive_settings(parent)
    with tempfile.TemporaryDirectory() as downloads:
        explanations = load_explanations(runs, Path(downloads), uri=uri) if not runs.empty else None
        report = build_report(runs, folder, title=title, robustness_cases=cases, explanations=explanations,
                              forecasts=forecasts, anytime_curves=curves,
                              adaptive_settings=settings, adaptive_reopened=reopened, **options)
    if log_to_mlflow:
        read.log_folder(execution_id, report.folder, artifact_path="report", uri=uri)
    return report
