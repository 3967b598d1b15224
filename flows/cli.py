"""The `automl-eval` command. Each command lives in a module of its own; this file lists them.

A command's module imports what the command needs at its top (MLflow, Prefect, pandas: seconds),
so the root group imports it only when that command runs or shows its own help: `automl-eval
--help` lists the commands from COMMANDS alone and starts in a fraction of a second.

A UserError anywhere becomes one red sentence and exit code 2, never a traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand, TyperGroup

from tasks.errors import UserError

# Each command (in the order `--help` lists them): the module whose `register(app)` adds it, and the
# summary `--help` shows (the first paragraph of the command's own help; a unit test keeps them equal).
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("flows.cli_run", "Run a suite: check its data, run each job under the budget, record in MLflow, "
                             "print a leaderboard."),
    "sync": ("flows.cli_sync",
             "Log job folders that finished but were never recorded (e.g. the tracking server was down)."),
    "report": ("flows.cli_report",
               "Leaderboard, ranks + Friedman/Nemenyi, Elo, Pareto fronts, stability and AMLB results.csv."),
    "compare": ("flows.cli_report",
                "Per dataset x framework: change, z-score vs the baseline's spread, regression, main factor, "
                "and where in the job (DTW-aligned resource series)."),
    "explain-regression": (
        "flows.cli_explain",
        "Re-run the regressed cells under every mix of the changed factors (data version, framework "
        "version, params, budget, project commit) and split the change over them by Shapley values, "
        "with intervals; a framework version not installed is installed first; when the framework "
        "version is the main factor, bisect the releases between its two versions."),
    "deploy": ("flows.cli_team",
               "Register the nightly, manual and job deployments on the running Prefect server."),
    "datasets": ("flows.cli_datasets",
                 "Datasets: build (DVC pull or materialize, then dvc repro), pull and push (the DVC "
                 "remote), list, validate (Great Expectations), status (dvc status in sentences)."),
    "suites": ("flows.cli_suites",
               "Suites: import an AutoML Benchmark (AMLB) benchmark file and constraint."),
    "frameworks": ("flows.cli_frameworks", "Framework adapters: what is installed here."),
    "team": ("flows.cli_team", "Start, stop and inspect the team stack on this machine (127.0.0.1)."),
    "cluster": ("flows.cli_cluster",
                "A team across hosts on this machine: network namespaces, no shared disk, TLS, an S3 store."),
}


@cache
def commands_of(module_name: str) -> dict[str, Any]:
    """The click commands a command module registers, by name (the module imported once)."""
    module = importlib.import_module(module_name)
    holder = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    module.register(holder)
    return dict(typer.main.get_group(holder).commands)


class _CommandTable(Mapping[str, Any]):
    """COMMANDS as a group's command table: a command's module is imported when it is looked up."""

    def __getitem__(self, name: str) -> Any:
        return commands_of(COMMANDS[name][0])[name]

    def __iter__(self) -> Iterator[str]:
        return iter(COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS)


class LazyCommands(TyperGroup):
    """The root group: a command's module is imported when the command is looked up to run, and
    the listing of `--help` is made from COMMANDS' summaries without importing any of them."""

    _listing = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _CommandTable()  # type: ignore[assignment]  # typer reads it; nothing adds to it

    # The three overrides below take typer.Context, as typer hands them; the base class names the
    # Context of typer's private copy of click, which typer.Context extends (hence the ignores).
    def list_commands(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return list(COMMANDS)  # typer's own reads each command, which would import them all

    def get_command(self, ctx: typer.Context, cmd_name: str) -> Any:  # type: ignore[override]
        if self._listing and cmd_name in COMMANDS:
            return TyperCommand(cmd_name, help=COMMANDS[cmd_name][1])
        return super().get_command(ctx, cmd_name)

    def format_help(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


app = typer.Typer(
    name="automl-eval",
    cls=LazyCommands,
    help="Evaluate AutoML frameworks under one enforced budget; results in MLflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


@app.callback()
def _root() -> None:
    """Nothing to do before a command; a callback is what makes typer build a group of the app."""


def main() -> None:
    try:
        # Standalone: typer prints a usage error in one panel and exits 2, an interrupt exits 130,
        # typer.Exit and sys.exit pass their codes; anything else, a UserError included, comes out here.
        app()
    except UserError as exc:
        # escape: a sentence naming autogluon.tabular[lightgbm,catboost] keeps its brackets.
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(UserError.exit_code)


if __name__ == "__main__":
    main()
