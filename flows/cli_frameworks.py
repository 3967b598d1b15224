"""`automl-eval frameworks list`: every framework adapter, its installed version or how to install it."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from flows.output import print_json, print_table

console = Console()
frameworks_app = typer.Typer(help="Framework adapters: what is installed here.", no_args_is_help=True)


@frameworks_app.command("list")
def list_command(
    as_json: bool = typer.Option(False, "--json", help="Print the adapters as JSON (one object each)."),
) -> None:
    """Each adapter with its version, or why it cannot run here (not installed, no Java)."""
    from tasks.frameworks.registry import all_adapters

    if as_json:
        print_json([
            {
                "framework": name,
                "package": adapter.package,
                "version": adapter.version(),
                "problem_types": sorted(adapter.problem_types),
                "gpu": adapter.uses_gpu,
                "status": adapter.unavailable_reason() or "ready",
            }
            for name, adapter in sorted(all_adapters().items())
        ])
        return

    table = Table("framework", "package", "version", "problem types", "GPU", "status")
    for name, adapter in sorted(all_adapters().items()):
        reason = adapter.unavailable_reason()
        table.add_row(
            name,
            adapter.package,
            adapter.version() or "not installed",
            ", ".join(sorted(adapter.problem_types)),
            "yes" if adapter.uses_gpu else "no",
            f"[red]{reason}[/]" if reason else "[green]ready[/]",
        )
    print_table(console, table)
    console.print("Variants: autogluon:PRESET (e.g. autogluon:best_quality); params starting with '_' "
                  "are for the adapter, the rest go to the framework.", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(frameworks_app, name="frameworks")
