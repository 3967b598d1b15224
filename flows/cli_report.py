"""`automl-eval report` and `automl-eval compare`: decisions from what MLflow holds."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import typer
from rich.console import Console
from rich.table import Table

from flows.output import frame_records, print_json
from tasks.errors import UserError
from tasks.paths import inside_project
from tasks.report.build import ReportOptions, build_report, default_folder, report_execution
from tasks.report.compare import Comparison, Thresholds
from tasks.report.compare_markdown import diagnostic_rows, write_folder
from tasks.report.compare_store import compare_executions, resolve_execution
from tasks.report.explanations import compare_importance
from tasks.report.reference import SUMMARY_FILE, read_reference
from tasks.tracking import read


def _console() -> Console:
    """Rich's console; piped output (CI logs, files) gets a wide table instead of 80 folded columns."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def _print_frame(console: Console, frame: pd.DataFrame, title: str) -> None:
    table = Table(title=title, title_justify="left")
    for column in frame.columns:
        table.add_column(str(column), overflow="fold")
    for row in frame.itertuples(index=False):
        # NaN (no noise estimate, a failed side) prints as an empty cell, not "nan".
        table.add_row(*[("" if v != v else f"{v:.4g}") if isinstance(v, float) else str(v) for v in row])
    console.print(table)


def _print_executions(found: pd.DataFrame) -> None:
    if found.empty:
        _console().print("No suite executions in the MLflow store.")
        return
    columns = [
        c
        for c in ("execution_id", "suite", "start_time", "execution_state", "team", "regression")
        if c in found
    ]
    shown = found[columns].copy()
    shown["start_time"] = shown["start_time"].dt.strftime("%Y-%m-%d %H:%M UTC")
    _print_frame(
        _console(), shown.fillna(""), "Executions, newest first (use an id, SUITE@latest or SUITE@N)"
    )


def report(
    suite: str | None = typer.Argument(
        None, help="Suite name (its latest execution), or SUITE@previous / SUITE@N."
    ),
    run_id: str | None = typer.Option(None, "--run-id", help="An execution (parent run) id to report on."),
    filter_string: str | None = typer.Option(
        None,
        "--filter",
        help="MLflow filter over job runs, e.g. \"tags.dataset = 'iris'\" (with SUITE: within it).",
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Report folder (default: reports/<suite>-<execution>)."
    ),
    baseline: str = typer.Option(
        "constant", help="Framework scored 1000 Elo; its score imputes failed jobs."
    ),
    spread_threshold: float = typer.Option(
        0.10,
        help="Flag frameworks whose std over folds x seeds exceeds this share of the baseline-to-best span.",
    ),
    bootstrap: int = typer.Option(200, help="Bootstrap rounds for the Elo intervals."),
    list_executions: bool = typer.Option(
        False, "--list", help="List executions (of SUITE, or all) and exit."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the across-datasets table as JSON."),
    reference: Path | None = typer.Option(
        None, "--reference",
        help="A results.csv in AMLB's format (AMLB's published 8c4h one: "
        "tests/fixtures/amlb_per_fold_8c4h.csv): "
        "this run's result beside it per task, framework and fold, unpublished cells marked.",
    ),
) -> None:
    """Leaderboard, ranks + Friedman/Nemenyi, Elo, Pareto fronts, stability and AMLB results.csv."""
    out = inside_project(out, "--out") if out is not None else None
    if list_executions:
        _print_executions(read.executions(suite=suite.partition("@")[0] if suite else None))
        return
    options: ReportOptions = {
        "baseline": baseline, "spread_threshold": spread_threshold, "bootstrap_rounds": bootstrap
    }
    if reference is not None:  # read before any work, so a bad file costs nothing
        options["reference"] = (reference.name, read_reference(reference))
    if filter_string:
        suite_name = suite.partition("@")[0] if suite else None
        runs = read.job_runs(suite=suite_name, filter_string=filter_string)
        folder = out or default_folder(f"{suite_name}-filtered" if suite_name else "filtered")
        result = build_report(runs, folder, title=f"runs matching {filter_string}", **options)
        executions = set(runs["execution_id"]) if "execution_id" in runs else set()
        # Runs of one execution: the report belongs on its parent run; across executions it has no home.
        logged_on = next(iter(executions)) if len(executions) == 1 and next(iter(executions)) else ""
        if logged_on:
            read.log_folder(logged_on, folder, artifact_path=f"report-{folder.name}")
    else:
        if run_id:
            execution_id = resolve_execution(run_id)
        elif suite:
            execution_id = resolve_execution(suite if "@" in suite else f"{suite}@latest")
        else:
            raise UserError('name a SUITE, --run-id ID or --filter "..."; see `automl-eval report --help`.')
        result = report_execution(execution_id, folder=out, **options)
        logged_on = execution_id
    side_by_side = result.folder / SUMMARY_FILE
    beside = pd.read_csv(side_by_side) if reference is not None and side_by_side.is_file() else None
    if as_json:
        print_json({
            "folder": str(result.folder),
            "logged_on": logged_on or None,
            "aggregate": frame_records(result.aggregate),
            "stability_flags": list(result.stability_flags),
            **({"reference": frame_records(beside)} if beside is not None else {}),
        })
        return
    console = _console()
    _print_frame(
        console, result.aggregate.round(4), "Across datasets (rank 1 = best; score 0 = baseline, 1 = best)"
    )
    if result.friedman is not None:
        console.print(
            f"Friedman p = {result.friedman.p_value:.3g}; Nemenyi CD = {result.critical_difference:.3f}"
        )
    if result.stability_flags:
        console.print(
            f"[yellow]unstable (spread > {spread_threshold:.0%}):[/] {', '.join(result.stability_flags)}"
        )
    if beside is not None:
        name = reference.name if reference else ""
        _print_frame(console, beside.round(4),
                     f"Beside {name} (means over the folds both sides have; per fold: reference.csv)")
    robust = result.robustness
    if robust is not None and not robust.leaderboard.empty:
        _print_frame(console, robust.leaderboard.round(4),
                     "Robustness (rank on robustness AUC; clean rank beside)")
    if robust is not None and not robust.families.empty:
        _print_frame(console, robust.families.round(3), "Robustness AUC per corruption family")
    serving_table = result.folder / "serving_load.csv"
    if serving_table.is_file():  # served jobs: the load table (its figure is in the folder)
        _print_frame(console, pd.read_csv(serving_table).drop(columns=["p50_ms"]).round(3),
                     "Serving under load (closed loop: latency ms, requests/s, error rate)")
    where = f"; also attached to MLflow run {logged_on} as artifacts" if logged_on else ""
    console.print(f"Report written to [bold]{result.folder}[/] (report.md, CSVs, PNGs){where}.")


def compare(
    base: str = typer.Argument(..., help="Baseline execution: an id, SUITE@previous, SUITE@N."),
    cand: str = typer.Argument(..., help="Candidate execution: an id, SUITE@latest, SUITE@N."),
    also: list[str] = typer.Option(
        [],
        "--also",
        help="More executions whose runs vary one factor at a time (enables the Shapley split); repeatable.",
    ),
    result_threshold: float = typer.Option(0.02, help="Relative drop of `result` that counts (0.02 = 2%)."),
    cost_threshold: float = typer.Option(0.25, help="Relative rise of fit time, latency, RSS that counts."),
    z_threshold: float = typer.Option(3.0, "--z", help="How many standard errors of the baseline's noise."),
    out: Path | None = typer.Option(None, "--out", help="Folder for compare.csv and compare.md."),
    fail_on_regression: bool = typer.Option(False, help="Exit with code 1 when anything regressed."),
    every_metric: bool = typer.Option(
        False, "--all", help="Show every metric of every cell (default: result, plus costs that stand out)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the diagnosis rows as JSON."),
) -> None:
    """Per dataset x framework: change, z-score vs the baseline's spread, regression, main factor,
    and where in the job (DTW-aligned resource series)."""
    out = inside_project(out, "--out") if out is not None else None
    base_id, cand_id = resolve_execution(base), resolve_execution(cand)
    result = compare_executions(
        base_id,
        cand_id,
        also=[resolve_execution(ref) for ref in also],
        thresholds=Thresholds(result_threshold, cost_threshold, z_threshold),
    )
    folder = write_folder(
        result, out or default_folder(f"compare-{base_id[:8]}-vs-{cand_id[:8]}"), base_id, cand_id
    )
    # Appends to compare.md when the runs were explained.
    base_runs, cand_runs = read.job_runs(execution_id=base_id), read.job_runs(execution_id=cand_id)
    shifts = compare_importance(base_runs, cand_runs, folder)
    rows = diagnostic_rows(result, every_metric=every_metric)
    if as_json:
        _print_compare_json(rows, result, base_id, cand_id, folder)
        if len(result.regressions) and fail_on_regression:
            sys.exit(1)
        return
    console = _console()
    if rows.empty:
        console.print(f"Nothing in common to compare between {base_id} and {cand_id}.")
    else:
        _print_frame(console, rows, f"Diagnosis: {cand_id} (current) vs {base_id} (baseline)")
    if result.unmatched:
        console.print("Not compared: " + "; ".join(result.unmatched))
    if shifts is not None and shifts["shift"].any():
        _print_frame(console, shifts[shifts["shift"]], "Importance shifts (top-k features changed)")
    count = len(result.regressions)
    console.print(
        f"{'[bold red]' if count else '[green]'}{count} regression(s)[/]; "
        f"full table in {folder / 'compare.csv'}, with plots in {folder / 'compare.md'}"
    )
    if count and fail_on_regression:
        sys.exit(1)


def _print_compare_json(rows: pd.DataFrame, result: Comparison, base_id: str, cand_id: str,
                        folder: Path) -> None:
    print_json({"baseline": base_id, "candidate": cand_id, "rows": frame_records(rows),
                "regressions": len(result.regressions), "unmatched": list(result.unmatched),
                "table": str(folder / "compare.csv")})


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("report")(report)
    app.command("compare")(compare)
