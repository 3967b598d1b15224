"""`automl-eval run SUITE`: its options, and the environment Prefect and MLflow are imported into.

In embedded mode (no PREFECT_API_URL) the flow runs on Prefect's ephemeral API: no server, its
database under the project's git-ignored `.prefect/`, telemetry off and Prefect's own log lines kept
to warnings, so a user sees the progress bar and the leaderboard, not the orchestrator. Both read
their settings when first imported, so the run itself (flows/suite_run.py) is imported after
they are set, and `automl-eval run --help` loads neither.
"""

from __future__ import annotations

import logging
import os
import time
import warnings
from pathlib import Path

import typer
from rich.console import Console

from tasks import orphans, paths
from tasks.errors import UserError
from tasks.launch import chosen_launcher

console = Console()


def configure_embedded_prefect(*, verbose: bool = False) -> None:
    """Set Prefect's environment before it is imported; a user's own settings always win."""
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if not os.environ.get("PREFECT_API_URL"):
        # A per-project home keeps the ephemeral SQLite database away from other projects' runs.
        os.environ.setdefault("PREFECT_HOME", str(paths.project_root() / ".prefect"))
        # The first ephemeral start on a busy machine can be slow; the default wait is too short.
        os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
        # Ephemeral SQLite: longer waits for its write lock instead of "database is locked" errors.
        os.environ.setdefault("PREFECT_SERVER_DATABASE_TIMEOUT", "60")
        os.environ.setdefault("PREFECT_SERVER_DATABASE_CONNECTION_TIMEOUT", "30")
    if not verbose:
        # ERROR: MLflow's warnings are for people writing models by hand; --verbose shows them.
        os.environ.setdefault("MLFLOW_LOGGING_LEVEL", "ERROR")
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        # MLflow's "View run ... / View experiment ..." per job; the CLI prints the execution's link once.
        os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("PREFECT_LOGGING_SERVER_LEVEL", "CRITICAL")
        os.environ.setdefault("PREFECT_LOGGING_LOG_PRINTS", "false")
        for name in ("mlflow", "alembic", "great_expectations", "httpx", "urllib3", "py4j"):
            logging.getLogger(name).setLevel(logging.ERROR)
        # MLflow also speaks through Python warnings (hints on signatures, deprecations), not its logger.
        warnings.filterwarnings("ignore", module=r"mlflow(\.|$)")
    (paths.project_root() / ".prefect").mkdir(exist_ok=True)


class _ThirdPartyChatter(logging.Filter):
    """Drops libraries' notes that say nothing to a user of this command (kept with --verbose)."""

    _quiet_below_warning = ("great_expectations",)

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith(self._quiet_below_warning) and record.levelno < logging.WARNING)


def quiet_third_party_logs() -> None:
    """After Prefect set up logging: GE sets its own loggers to INFO on import, so filter at the handlers."""
    chatter = _ThirdPartyChatter()
    for handler in logging.getLogger().handlers:
        handler.addFilter(chatter)


def _guard_processes() -> None:
    """Before anything starts: stop what a killed earlier run left, and make sure this one leaves nothing."""
    prefect_home = os.environ.get("PREFECT_HOME")
    if prefect_home and not os.environ.get("PREFECT_API_URL"):
        stale = orphans.stop_stale_prefect_servers(Path(prefect_home))
        if stale:
            console.print(f"Stopped {len(stale)} Prefect API server(s) that an earlier, killed run of this "
                          f"project left running (pid {', '.join(map(str, stale))}).", highlight=False)
    orphans.guard_this_run()


def _split(option: str | None) -> list[str] | None:
    if option is None:
        return None
    names = [name.strip() for name in option.split(",") if name.strip()]
    return names or None


def run_command(
    suite: str = typer.Argument(..., help="suite name (specs/suites/NAME.yaml) or a suite YAML path"),
    frameworks: str | None = typer.Option(None, "--frameworks", help="only these frameworks, a,b"),
    datasets: str | None = typer.Option(None, "--datasets", help="only these datasets, comma-separated"),
    folds: int | None = typer.Option(None, "--folds", help="the first N folds instead of the suite's"),
    budget: str | None = typer.Option(None, "--budget", help="a budget name from specs/budgets.yaml"),
    team: str | None = typer.Option(None, "--team", help="team tag recorded on every run"),
    new: bool = typer.Option(False, "--new", help="start a fresh execution instead of resuming"),
    resume: str | None = typer.Option(None, "--resume", help="resume this execution (parent run id)"),
    retry_failed: bool = typer.Option(False, "--retry-failed",
                                      help="re-run the failed/timeout/memory jobs of the last execution"),
    parallel: int | None = typer.Option(None, "--parallel", help="jobs at once (default: as cores allow)"),
    verbose: bool = typer.Option(False, "--verbose", help="show Prefect's and MLflow's own logs"),
    as_json: bool = typer.Option(False, "--json",
                                 help="print the final leaderboard as JSON (progress on stderr)"),
) -> None:
    """Run a suite: check its data, run each job under the budget, record in MLflow, print a leaderboard."""
    if sum([new, resume is not None, retry_failed]) > 1:
        raise UserError("choose at most one of --new, --resume ID and --retry-failed.")
    if parallel is not None and parallel < 1:
        raise UserError(f"--parallel must be at least 1, not {parallel}.")
    chosen_launcher()  # a bad AUTOML_EVAL_LAUNCHER is one sentence before anything starts
    configure_embedded_prefect(verbose=verbose)
    _guard_processes()
    started = time.perf_counter()
    from flows.suite_run import run_suite  # inside: Prefect and MLflow read the settings set just above

    if not verbose:
        quiet_third_party_logs()
    execution = "new" if new else (resume or "auto")
    run_suite(suite, frameworks=_split(frameworks), datasets=_split(datasets), folds=folds, budget=budget,
              team=team, execution=execution, retry_failed=retry_failed, parallel=parallel, as_json=as_json,
              started=started)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("run")(run_command)
