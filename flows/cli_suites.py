"""`automl-eval suites import-amlb`: AMLB's benchmark and constraint files in, a suite and a budget out."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from tasks import paths
from tasks.data.amlb_frameworks import FRAMEWORKS
from tasks.data.amlb_import import import_benchmark
from tasks.errors import UserError
from tasks.frameworks.registry import find_environment, get_adapter

console = Console()
suites_app = typer.Typer(
    help="Suites: import an AutoML Benchmark (AMLB) benchmark file and constraint.", no_args_is_help=True
)


@suites_app.command("import-amlb")
def import_amlb_command(
    benchmark: Path = typer.Argument(..., help="An AMLB benchmark file (resources/benchmarks/NAME.yaml)."),
    constraint: Path | None = typer.Option(
        None, "--constraint", help="An AMLB constraints file (resources/constraints.yaml)."
    ),
    constraint_name: str | None = typer.Option(
        None, "--constraint-name", help="Which constraint of the file (needed when it holds several)."
    ),
    frameworks: str = typer.Option(
        "constantpredictor,RandomForest",
        "--frameworks",
        help="AMLB framework names, comma-separated (AutoGluon, H2OAutoML, flaml, lightgbm, ...).",
    ),
    name: str | None = typer.Option(None, "--name", help="The suite's name (default: the benchmark's)."),
    allow_more_cores: bool = typer.Option(
        False,
        "--allow-more-cores",
        help="Import a constraint that asks for more cores than this host has (a suite for team workers).",
    ),
) -> None:
    """Write specs/suites/NAME.yaml and its budget from an AMLB benchmark file and constraint.

    OpenML tasks become `openml/t/ID` (run `automl-eval datasets build` for their cards); a local
    train/test pair becomes a card with its own folds file.
    """
    result = import_benchmark(
        benchmark,
        constraint=constraint,
        constraint_name=constraint_name,
        frameworks=[part.strip() for part in frameworks.split(",") if part.strip()],
        name=name,
        allow_more_cores=allow_more_cores,
        unavailable=unavailable_adapters(),
    )
    root = paths.project_root()
    for path in result.written:
        console.print(f"wrote {path.relative_to(root)}", highlight=False)
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    console.print(
        f"suite {result.suite_path.stem}: {len(result.datasets)} datasets x {', '.join(result.frameworks)} "
        f"under budget {result.budget}; next: `automl-eval datasets build`, then "
        f"`automl-eval run {result.suite_path.stem}`.",
        highlight=False,
    )


def unavailable_adapters() -> dict[str, str]:
    """Why each adapter that AMLB's names map to cannot run here, for those that cannot (not
    installed, no Java): the import leaves their names out with that sentence."""
    reasons = {adapter: _unavailable(adapter) for adapter in set(FRAMEWORKS.values())}
    return {adapter: reason for adapter, reason in reasons.items() if reason}


def _unavailable(framework: str) -> str | None:
    """`name`: its adapter's reason; `name@version`: its environment's, not installed or broken
    (without starting its Python: an import stays quick)."""
    name, _, version = framework.partition("@")
    if not version:
        return get_adapter(name).unavailable_reason()
    try:
        find_environment(name, version).require_usable(probe=False)
    except UserError as exc:
        return str(exc)
    return None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(suites_app, name="suites")
