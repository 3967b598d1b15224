"""`automl-eval explain-regression BASE CAND`: run the mixes of what changed and name the culprit."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from flows.cli_run import configure_embedded_prefect, quiet_third_party_logs
from flows.output import print_json
from tasks import paths
from tasks.report.build import default_folder
from tasks.report.compare_store import resolve_execution


def explain_regression(
    base: str = typer.Argument(..., help="Baseline execution: an id, SUITE@previous, SUITE@N."),
    cand: str = typer.Argument(..., help="Regressed execution: an id, SUITE@latest, SUITE@N."),
    max_jobs: int = typer.Option(40, "--max-jobs", help="At most this many jobs in all the mixes together."),
    max_factors: int = typer.Option(
        4, "--max-factors", help="Every mix (2^k) up to this many factors; above it one factor at a time."
    ),
    rerun_ends: bool = typer.Option(
        False, "--rerun-ends", help="Run the baseline and candidate mixes again too (costs side by side)."
    ),
    out: Path | None = typer.Option(None, "--out", help="Folder for attribution.md and the CSVs."),
    verbose: bool = typer.Option(False, "--verbose", help="show Prefect's and MLflow's own logs"),
    as_json: bool = typer.Option(False, "--json", help="Print the shares as JSON."),
) -> None:
    """Re-run the regressed cells under every mix of the changed factors (data version, framework
    version, params, budget, project commit) and split the change over them by Shapley values, with
    intervals; a framework version not installed is installed first; when the framework version is
    the main factor, bisect the releases between its two versions."""
    started = time.perf_counter()
    out = paths.inside_project(out, "--out") if out is not None else None
    configure_embedded_prefect(verbose=verbose)
    from flows import explain_regression  # inside: Prefect reads the settings set just above

    if not verbose:
        quiet_third_party_logs()
    base_id, cand_id = resolve_execution(base), resolve_execution(cand)
    explanation = explain_regression.explain(
        base_id, cand_id, max_jobs=max_jobs, max_factors=max_factors, rerun_ends=rerun_ends
    )
    folder = explain_regression.write(
        explanation, out or default_folder(f"attribution-{base_id[:8]}-vs-{cand_id[:8]}")
    )
    if as_json:
        print_json(
            {
                "baseline": base_id,
                "candidate": cand_id,
                "folder": str(folder),
                "factors": explanation.factors,
                "unrunnable": explanation.unrunnable,
                "jobs_run": explanation.jobs_run,
                "seconds": time.perf_counter() - started,
                "shares": explanation.attribution.table().to_dict("records"),
                "mixes": [
                    {"mix": m.label, "execution_id": m.execution_id, "url": m.url, "install_s": m.install_s}
                    for m in (*explanation.mixes, *explanation.bisection_runs)
                ],
                "bisection": explanation.bisection.sentence() if explanation.bisection else None,
            }
        )
        return
    typer.echo(explain_regression.markdown(explanation))
    typer.echo(f"Written to {folder} (also on MLflow run {cand_id}, under attribution/).")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("explain-regression")(explain_regression)
