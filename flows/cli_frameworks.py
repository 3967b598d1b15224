"""`automl-eval frameworks list`: every framework adapter, its installed version or how to install it."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

console = Console()
frameworks_app = typer.Typer(help="Framework adapters: what is installed here.", no_args_is_help=True)


@frameworks_app.command("list")
def list_command() -> None:
    """Each adapter with its version, or why it cannot run here (not installed, no Java)."""
    from tasks.frameworks.registry import all_adapters

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
    console.print(table)
    console.print("Variants: autogluon:PRESET (e.g. autogluon:best_quality); params starting with '_' "
                  "are for the adapter, the rest go to the framework.", highlight=False)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(frameworks_app, name="frameworks")
