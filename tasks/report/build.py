"""The report folder: every table as CSV, the figures as PNG, report.md that ties them together,
and report.html, the same page with its figures embedded (MLflow's artifact viewer renders it)."""

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
from tasks.report import (
    adaptive,
    aggregate,
    amlb,
    anytime,
    elo,
    energy,
    forecasting,
    images,
    jobs,
    leaderboard,
    pareto,
    plots,
    ranking,
    robustness,
    scaling,
    serving,
    stability,
)
from tasks.report.explanations import ExplanationInputs
from tasks.report.explanations import load_inputs as load_explanations
from tasks.report.explanations import section as explain_section
from tasks.report.modality_table import modality_markdown, modality_table
from tasks.report.reference import section as reference_section
from tasks.report.tabarena import tabarena_frame
from tasks.specs import AdaptiveSettings, load_suite
from tasks.tracking import read
from tasks.tracking.adaptive_record import recorded_adaptive

PARETO_COSTS = ("fit_s", "latency_p99_ms")
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
    cells = jobs.with_imputation(table, baseline)
    scores, imputed = jobs.task_scores(cells)
    normalized = jobs.normalized_scores(scores, baseline)
    rank_table = ranking.ranks(scores)
    average_ranks = rank_table.mean().sort_values()
    board = leaderboard.leaderboard(table)
    totals = aggregate.aggregate(normalized, rank_table, jobs.dataset_rows(table), imputed)
    test = ranking.friedman(scores)
    datasets, frameworks = scores.shape
    notes: list[str] = []
    sampled = jobs.sampled_fits(table)
    if sampled:
        notes.append("fitted on a sample of the training rows, the most their budget allows or the suite's "
                     "_max_train_rows (the fit_rows metric), and scored on the whole test part: "
                     + "; ".join(sampled))

    figures: list[Path] = []
    cd_value = None
    if datasets >= 2 and frameworks >= 2:
        cd_value = ranking.nemenyi_critical_difference(frameworks, datasets, alpha)
        groups = ranking.cliques(average_ranks, cd_value)
        figures.append(
            plots.critical_difference(
                average_ranks,
                cd_value,
                groups,
                folder / "critical_difference.png",
                datasets=datasets,
                alpha=alpha,
            )
        )
    else:
        notes.append("critical difference needs at least 2 datasets and 2 frameworks")

    anchor = baseline if baseline in scores.columns else str(average_ranks.index[-1])
    if anchor != baseline:
        notes.append(
            f"Elo anchor: '{baseline}' is not in these runs, so '{anchor}' (lowest average rank) is 1000"
        )
    elo_table = None
    if frameworks >= 2:
        elo_table = elo.elo_ratings(cells, anchor=anchor, rounds=bootstrap_rounds).ratings
        figures.append(plots.elo(elo_table, anchor, folder / "elo.png"))
        wins = ranking.win_rates(cells)
        figures.append(plots.win_rate(wins, folder / "win_rate.png"))
        wins.to_csv(folder / "win_rate.csv")
        elo_table.to_csv(folder / "elo.csv", index=False)

    pareto_tables = []
    metrics = table.groupby("dataset")["metric"].first().to_dict()
    for cost in PARETO_COSTS:
        if table.loc[table["ok"], cost].notna().any():
            overall = pareto.across_datasets(table, normalized, cost)
            local = pareto.per_dataset(table, cost)
            figures.append(plots.pareto_overall(overall, cost, folder / f"pareto_{cost}.png"))
            figures.append(
                plots.pareto_per_dataset(local, metrics, cost, folder / f"pareto_{cost}_per_dataset.png")
            )
            pareto_tables.append(
                overall.assign(dataset="(all, normalized)").rename(columns={"score": "result"})
            )
            pareto_tables.append(local)
    steady = stability.per_dataset(table, jobs.spans(scores, baseline), spread_threshold)
    steady_summary = stability.per_framework(steady, normalized, spread_threshold)
    if steady["spread"].notna().any():
        figures.append(plots.stability(steady, spread_threshold, folder / "stability.png"))
    flags = sorted(steady_summary.loc[steady_summary["flagged"], "framework"])

    board.to_csv(folder / "leaderboard.csv", index=False)
    totals.to_csv(folder / "aggregate.csv", index=False)
    rank_table.assign(imputed=imputed.any(axis=1)).to_csv(folder / "ranks.csv")
    cells.to_csv(folder / "scores_imputed.csv", index=False)
    steady.to_csv(folder / "stability.csv", index=False)
    steady_summary.to_csv(folder / "stability_frameworks.csv", index=False)
    if pareto_tables:
        pd.concat(pareto_tables, ignore_index=True).to_csv(folder / "pareto.csv", index=False)
    amlb.write_results_csv(table, folder / "results.csv")
    tabarena_frame(table).to_csv(folder / "tabarena.csv", index=False)
    # Multimodal suites run each modality combination as its own dataset BASE[STREAMS].
    modalities = modality_table(table)
    if not modalities.empty:
        modalities.to_csv(folder / "modality.csv", index=False)
    robust = robustness.build(table, robustness_cases, folder, alpha=alpha, baseline=baseline)
    if robust is not None:
        figures += robust.figures

    serving_lines, serving_figures = serving.section(table, folder, _table)
    serving_lines += energy.section(table, folder, _table) + anytime.section(table, _table)
    scaling_lines, scaling_figures = scaling.section(table, folder, _table)
    serving_lines += scaling_lines
    figures += serving_figures + anytime.figures(anytime_curves, folder)
    forecast_lines, forecast_figures = forecasting.section(table, forecasts, folder, _table)
    image_lines, image_figures = images.section(table, folder, _table)
    adaptive_lines = adaptive.section(table, adaptive_settings, folder, _table, adaptive_reopened)
    serving_lines = adaptive_lines + forecast_lines + image_lines + serving_lines
    if reference is not None:
        reference_lines, reference_figures = reference_section(
            amlb.results_frame(table), reference[1], reference[0], folder, _table)
        serving_lines = reference_lines + serving_lines
        figures += reference_figures
    markdown = _markdown(
        title,
        board,
        totals,
        elo_table,
        anchor,
        test,
        cd_value,
        alpha,
        steady_summary,
        flags,
        imputed,
        spread_threshold,
        notes,
        figures,
        modality_markdown(modalities),
        robustness.markdown(robust, _table, alpha) if robust is not None else [],
        serving_lines,
    )
    explain_lines, explain_figures = explain_section(table, explanations, folder)
    if explain_lines or explain_figures:
        figures += explain_figures
        files = markdown.index("## Files")
        figure_lines = "".join(f"- ![{p.stem}]({p.name})\n" for p in explain_figures)
        markdown = markdown[:files] + "\n".join(explain_lines) + "\n" + markdown[files:] + figure_lines
    figures += forecast_figures + image_figures + scaling_figures  # embedded in their own sections already
    write_report_pages(folder, markdown, title)
    return Report(folder, markdown, board, totals, elo_table, test, cd_value, flags, figures, anchor, robust)


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
        [f"# Report: {title}", "", "No job produced a result; failures by status:", "", _table(board), ""]
    )
    write_report_pages(folder, markdown, title)
    return Report(folder, markdown, board, pd.DataFrame(), None, None, None, [])


def _cell(value: object, digits: int) -> str:
    if isinstance(value, float):
        return "" if pd.isna(value) else f"{value:.{digits}g}"
    return str(value).replace("|", "/")


def _table(frame: pd.DataFrame, digits: int = 4) -> str:
    """A GitHub markdown table (Prefect and MLflow render it)."""
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(_cell(v, digits) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *rows])


def _markdown(
    title: str,
    board: pd.DataFrame,
    totals: pd.DataFrame,
    elo_table: pd.DataFrame | None,
    anchor: str,
    test: ranking.FriedmanResult | None,
    cd_value: float | None,
    alpha: float,
    steady_summary: pd.DataFrame,
    flags: list[str],
    imputed: pd.DataFrame,
    spread_threshold: float,
    notes: list[str],
    figures: list[Path],
    modalities: str = "",
    robust_lines: list[str] | None = None,
    serving_lines: list[str] | None = None,
) -> str:
    lines = [f"# Report: {title}", ""]
    lines += [
        "## Across datasets",
        "",
        "Average rank (1 = best) and mean normalized score (0 = baseline, 1 = best per dataset), "
        "unweighted and weighted by dataset rows. Failed jobs score as the constant predictor "
        "(imputed_datasets counts the datasets where that happened).",
        "",
        _table(totals),
        "",
    ]
    if test is not None:
        verdict = "differ" if test.p_value < alpha else "do not differ significantly"
        lines += [
            f"Friedman test over {test.datasets} datasets x {test.frameworks} frameworks: "
            f"chi2 = {test.statistic:.3f}, p = {test.p_value:.3g} (Iman-Davenport F = "
            f"{test.iman_davenport_f:.3f}, p = {test.iman_davenport_p:.3g}): the average ranks {verdict} "
            f"at alpha = {alpha}."
        ]
    if cd_value is not None:
        lines += [f"Nemenyi critical difference: {cd_value:.3f} ranks.", ""]
    if elo_table is not None:
        lines += [
            f"## Elo (Bradley-Terry, 95% bootstrap interval; {anchor} = 1000)",
            "",
            _table(elo_table, 5),
            "",
        ]
    imputed_cells = [f"{fw} on {ds}" for ds, row in imputed.iterrows() for fw, flag in row.items() if flag]
    if imputed_cells:
        lines += [
            "Imputed with the constant predictor's score (failed or missing jobs): "
            + ", ".join(imputed_cells)
            + ".",
            "",
        ]
    lines += [
        "## Stability",
        "",
        "Spread = std of `result` over folds and seeds as a share of the dataset's baseline-to-best span "
        f"(cv = std / |mean| alongside); flagged above {spread_threshold:.0%}: "
        + (", ".join(flags) if flags else "none")
        + ".",
        "",
        _table(steady_summary),
        "",
    ]
    lines += ["## Leaderboard per dataset", "", _table(board), ""]
    if modalities:
        lines += [
            "## Modality combinations",
            "",
            "Mean over folds per combination of streams; * = on the Pareto front of score (up) and "
            "latency (down) within the dataset.",
            "",
            modalities,
            "",
        ]
    lines += robust_lines or []
    lines += serving_lines or []
    if notes:
        lines += ["## Notes", "", *[f"- {note}." for note in notes], ""]
    lines += [
        "## Files",
        "",
        "- results.csv: AMLB results.csv format (one row per job)",
        "- tabarena.csv: TabArena's long format (one row per finished job: method, dataset, fold, "
        "metric_error, times)",
        *(["- modality.csv: the modality combination table"] if modalities else []),
        *(["- report.html: this page with the figures embedded"] if figures else []),
        *[f"- ![{p.stem}]({p.name})" for p in figures],
        "",
    ]
    return "\n".join(lines)


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
