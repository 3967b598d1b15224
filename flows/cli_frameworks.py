"""`automl-eval frameworks list` and `frameworks install`: every framework adapter, its installed
version or how to install it, and the environments of its own that it declares."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from flows.output import print_json, print_table
from tasks import environment_install
from tasks.errors import UserError
from tasks.frameworks.environments import declared
from tasks.frameworks.registry import all_adapters, all_environments, find_environment, get_adapter
from tasks.specs import check_plain_names, split_framework_id

console = Console()
frameworks_app = typer.Typer(help="Framework adapters: what is installed here.", no_args_is_help=True)


def _environment_rows(adapter: Any) -> list[dict[str, Any]]:
    rows = []
    for environment in declared(adapter):
        state = environment.state()
        rows.append({
            "environment": environment.id,
            "python": environment.spec.python,
            "requirements": [*environment.spec.requirements,
                             *(f"{package} (--no-deps)" for package in environment.spec.no_deps)],
            "folder": str(environment.folder),
            "status": state.status,
            "reason": state.reason,
            "install": environment.install_command,
        })
    return rows


@frameworks_app.command("list")
def list_command(
    as_json: bool = typer.Option(False, "--json", help="Print the adapters as JSON (one object each)."),
) -> None:
    """Each adapter with its version, or why it cannot run here (not installed, no Java), then each
    framework environment (NAME@VERSION), installed or not, with the command that installs it."""
    if as_json:
        print_json([
            {
                "framework": name,
                "package": adapter.package,
                "version": adapter.version(),
                "problem_types": sorted(adapter.problem_types),
                "gpu": adapter.uses_gpu,
                "status": adapter.unavailable_reason() or "ready",
                "environments": _environment_rows(adapter),
            }
            for name, adapter in sorted(all_adapters().items())
        ])
        return

    table = Table("framework", "package", "version", "problem types", "GPU", "status")
    environments = Table("environment", "python", "requirements", "status", "install with")
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
        for row in _environment_rows(adapter):
            colour = {"installed": "green", "broken": "red"}.get(row["status"], "yellow")
            status = f"[{colour}]{row['status']}[/]" + (f": {escape(row['reason'])}" if row["reason"] else "")
            environments.add_row(row["environment"], row["python"], escape(", ".join(row["requirements"])),
                                 status, "" if row["status"] == "installed" else row["install"])
    print_table(console, table)
    console.print("Variants: autogluon:PRESET (e.g. autogluon:best_quality); params starting with '_' "
                  "are for the adapter, the rest go to the framework.", highlight=False)
    if environments.row_count:
        print_table(console, environments)
        console.print("A suite runs a framework in its own environment as NAME@VERSION (hgb@1.7.2); "
                      "NAME alone runs in the main environment. `make setup-frameworks` installs them all.",
                      highlight=False)


def _chosen_environments(targets: list[str], every: bool) -> list[Any]:
    if every:
        return all_environments()
    if not targets:
        raise UserError("name the environments to install, e.g. `automl-eval frameworks install hgb@1.7.2`, "
                        "or give --all.")
    chosen = []
    for target in targets:
        check_plain_names("frameworks install", frameworks=[target])
        parts = split_framework_id(target)
        name, variant, version = parts["name"] or "", parts["variant"], parts["version"]
        if variant:
            raise UserError(f"frameworks install: '{target}' names a variant; variants run in their "
                            f"framework's environments, so install {name}@VERSION.")
        if version is not None:
            chosen.append(find_environment(name, version))
            continue
        found = declared(get_adapter(name))
        if not found:
            raise UserError(f"framework '{name}' declares no environment of its own; it runs in the main "
                            "environment (see `automl-eval frameworks list`).")
        chosen.extend(found)
    return list(dict.fromkeys(chosen))


@frameworks_app.command("install")
def install_command(
    targets: list[str] = typer.Argument(None, help="NAME@VERSION (one environment) or NAME (all of its)."),
    every: bool = typer.Option(False, "--all", help="Install every environment the adapters declare."),
    reinstall: bool = typer.Option(False, "--reinstall", help="Replace environments already installed."),
) -> None:
    """Create .venvs/NAME-VERSION with the framework at that version (python -m venv, then pip)."""
    def progress(line: str) -> None:
        # markup=False: requirements such as autogluon.tabular[lightgbm,catboost] are not rich markup.
        console.print(line, highlight=False, soft_wrap=True, markup=False)

    chosen = _chosen_environments(list(targets or []), every)
    failed: list[str] = []
    for environment in chosen:
        try:
            environment_install.install(environment, progress, reinstall=reinstall)
        except UserError as exc:
            if len(chosen) == 1:
                raise
            # One environment that cannot install (autogluon_mm here) must not keep the others out.
            console.print(f"error: {exc}", style="red", highlight=False, soft_wrap=True, markup=False)
            failed.append(environment.id)
    if failed:
        raise UserError(f"{len(failed)} of {len(chosen)} environments did not install ({', '.join(failed)}); "
                        "the reason for each is printed above, the others are installed.")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(frameworks_app, name="frameworks")
