"""The `automl-eval` command. Each command group lives in its own module; this file wires them.

A UserError anywhere becomes one red sentence and exit code 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console
from rich.markup import escape

from tasks.errors import UserError

app = typer.Typer(
    name="automl-eval",
    help="Evaluate AutoML frameworks under one enforced budget; results in MLflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True)


def _register_groups() -> None:
    # Imported here so `automl-eval --help` stays fast and a broken group names itself.
    from flows import cli_datasets, cli_frameworks, cli_report, cli_run, cli_team

    for module in (cli_datasets, cli_frameworks, cli_run, cli_report, cli_team):
        module.register(app)


def main() -> None:
    try:
        _register_groups()
        # standalone_mode=False returns typer.Exit's code instead of exiting: pass it on.
        code = app(standalone_mode=False)
        sys.exit(code if isinstance(code, int) else 0)
    except UserError as exc:
        # escape: a sentence naming autogluon.tabular[lightgbm,catboost] keeps its brackets.
        err_console.print(f"[bold red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(UserError.exit_code)
    except SystemExit:
        raise
    except Exception as exc:  # click's own usage errors and typer's exits
        import click

        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(2)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(130)
        raise


if __name__ == "__main__":
    main()
