"""`automl-eval run SUITE` and `automl-eval sync`.

In embedded mode (no PREFECT_API_URL) the flow runs on Prefect's ephemeral API: no server, its
database under the project's git-ignored `.prefect/`, telemetry off and Prefect's own log lines kept
to warnings, so a user sees the progress bar and the leaderboard, not the orchestrator.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from typing import Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from flows.output import print_json, print_table
from tasks import paths
from tasks.errors import UserError

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
    from pathlib import Path

    from tasks import orphans

    prefect_home = os.environ.get("PREFECT_HOME")
    if prefect_home and not os.environ.get("PREFECT_API_URL"):
        stale = orphans.stop_stale_prefect_servers(Path(prefect_home))
        if stale:
            console.print(f"Stopped {len(stale)} Prefect API server(s) that an earlier, killed run of this "
                          f"project left running (pid {', '.join(map(str, stale))}).", highlight=False)
    orphans.guard_this_run()


def _start_ephemeral_api() -> None:
    """Start Prefect's ephemeral API server now, one run of the project at a time.

    Two runs starting together would both migrate the project's `.prefect/` database, and one then
    timed out waiting for its server. Prefect reuses this server for the flow (one per process).
    """
    if os.environ.get("PREFECT_API_URL") or not os.environ.get("PREFECT_HOME"):
        return
    import fcntl
    from pathlib import Path

    from prefect.server.api.server import SubprocessASGIServer

    with (Path(os.environ["PREFECT_HOME"]) / ".start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        SubprocessASGIServer().start()


def _split(option: str | None) -> list[str] | None:
    if option is None:
        return None
    names = [name.strip() for name in option.split(",") if name.strip()]
    return names or None


class ProgressBar:
    """Jobs done/total, the jobs now running, and an ETA, drawn from the flow's job events."""

    def __init__(self, progress: Progress) -> None:
        self._progress = progress
        self._task_id = progress.add_task("planning", total=None, running="", waiting="")
        self._running: dict[str, str] = {}
        self._lock = threading.Lock()
        self.failures: list[str] = []

    def _refresh(self) -> None:
        running = ", ".join(self._running.values())
        self._progress.update(self._task_id, running=running[:80])

    def jobs_planned(self, count: int) -> None:
        self._progress.update(self._task_id, total=count, completed=0, description="jobs")

    def job_started(self, job: Any) -> None:
        with self._lock:
            self._running[job.key] = job.label
            self._refresh()

    def job_finished(self, job: Any, result: Any) -> None:
        with self._lock:
            self._running.pop(job.key, None)
            if result.status != "ok":
                self.failures.append(f"{job.label}: {result.status}")
            self._progress.advance(self._task_id)
            self._refresh()
            self._show_waiting()

    def _show_waiting(self) -> None:
        from tasks.tracking.breaker import waiting_now

        waiting = waiting_now()
        text = f"[yellow]{waiting.count} waiting on disk ({waiting.reason})[/]" if waiting.count else ""
        self._progress.update(self._task_id, waiting=text)


def print_leaderboard(rows: list[dict[str, Any]], suite: str, execution_id: str) -> None:
    from flows.benchmark import table_row

    table = Table(title=f"{suite} — execution {execution_id}", show_lines=False)
    cells = [table_row(row) for row in rows]
    if not cells:
        console.print("No job results to rank.")
        return
    for header in cells[0]:
        textual = header in ("dataset", "framework", "metric", "failures")
        table.add_column(header, justify="left" if textual else "right")
    previous = None
    for cell in cells:
        if previous is not None and cell["dataset"] != previous:
            table.add_section()
        previous = cell["dataset"]
        table.add_row(*[str(value) for value in cell.values()])
    print_table(console, table)


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
    from tasks.launch import chosen_launcher

    chosen_launcher()  # a bad AUTOML_EVAL_LAUNCHER is one sentence before anything starts
    configure_embedded_prefect(verbose=verbose)
    _guard_processes()
    started = time.perf_counter()
    from flows.benchmark import benchmark, check_execution_choice, resolve_plan
    from flows.team_dispatch import choose_dispatcher

    if not verbose:
        quiet_third_party_logs()

    framework_names, dataset_names = _split(frameworks), _split(datasets)
    # Bad names are one sentence and exit 2 here, before Prefect starts.
    plan = resolve_plan(suite, framework_names, dataset_names, folds, budget)
    from tasks.tracking import suite_lock

    suite_lock.hold(plan.suite.name)  # the same suite twice at once: one sentence, before Prefect starts
    execution = "new" if new else (resume or "auto")
    check_execution_choice(suite, execution, retry_failed)
    _start_ephemeral_api()
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[running]}"),
               TextColumn("{task.fields[waiting]}")]
    progress_console = Console(stderr=True) if as_json else console  # stdout holds only the JSON
    with Progress(*columns, console=progress_console, transient=False) as progress:
        bar = ProgressBar(progress)
        outcome = benchmark(suite, frameworks=framework_names, datasets=dataset_names, folds=folds,
                            budget=budget, team=team, execution=execution, retry_failed=retry_failed,
                            parallel=parallel, trigger="cli", dispatcher=choose_dispatcher(bar, parallel))
    if as_json:
        print_json({key: outcome.get(key) for key in (
            "suite", "execution_id", "leaderboard", "counts", "planned", "ran", "gate_failures", "report",
            "waiting", "execution_url")})
        return
    print_leaderboard(outcome["leaderboard"], outcome["suite"], outcome["execution_id"])
    counts = ", ".join(f"{status} {count}" for status, count in sorted(outcome["counts"].items()))
    console.print(f"{outcome['planned']} jobs ({counts}); ran {outcome['ran']} now in "
                  f"{time.perf_counter() - started:.0f} s.")
    if outcome.get("report"):
        console.print(f"Report: {outcome['report']}/report.md (also on the execution's MLflow run).",
                      highlight=False)
    for name, why in outcome["gate_failures"].items():
        console.print(f"[yellow]skipped dataset {name}[/]: {why}", highlight=False)
    for failure in bar.failures:
        console.print(f"[red]{failure}[/]", highlight=False)
    waiting = outcome.get("waiting") or {}
    if waiting.get("count"):
        console.print(f"[yellow]{waiting['count']} result(s) wait on disk[/] ({waiting['reason']}): "
                      "nothing is lost; `automl-eval sync` logs them once the store answers.",
                      highlight=False)
    console.print("Results in MLflow: `make ui`; again later: `automl-eval run "
                  f"{suite}` resumes, `--retry-failed` re-runs failures.", highlight=False)
    if outcome.get("execution_url"):
        console.print(f"Execution: {outcome['execution_url']}", highlight=False, soft_wrap=True)


def sync_command() -> None:
    """Log job folders that finished but were never recorded (e.g. the tracking server was down)."""
    from tasks.tracking.breaker import describe, is_unreachable
    from tasks.tracking.execution import apply_deferred_finishes
    from tasks.tracking.job_folder import pending_job_dirs, waiting_reason
    from tasks.tracking.job_run import log_job_dir
    from tasks.tracking.suite_lock import running_elsewhere

    pending = pending_job_dirs()
    running = sorted({job_dir.parent.name for job_dir in pending if running_elsewhere(job_dir.parent.name)})
    if running:
        console.print(f"Left to the runs in progress (they log their own results): {', '.join(running)}.",
                      highlight=False)
        pending = [job_dir for job_dir in pending if job_dir.parent.name not in running]
    if not pending:
        _end_deferred_executions(apply_deferred_finishes)
        console.print("Nothing to sync: every finished job is recorded.")
        return
    console.print(f"{len(pending)} result(s) wait on disk:", highlight=False)
    for job_dir in pending:
        why = waiting_reason(job_dir) or "not logged yet"
        console.print(f"  {job_dir.parent.name}/{job_dir.name}: {why}", highlight=False)
    failed = 0
    for job_dir in pending:
        try:
            logged = log_job_dir(job_dir)
            console.print(f"logged {job_dir.name} -> run {logged.run_id}", highlight=False)
        except Exception as exc:
            failed += 1
            console.print(f"[red]could not log {job_dir}[/]: {describe(exc)}", highlight=False)
            if is_unreachable(exc):  # the store is away: the others would only wait the same
                failed = len(pending) - pending.index(job_dir)
                break
    if failed:
        raise UserError(
            f"{failed} job folder(s) could not be logged; check MLFLOW_TRACKING_URI and run sync again."
        )
    _end_deferred_executions(apply_deferred_finishes)


def _end_deferred_executions(apply: Any) -> None:
    from tasks.tracking.breaker import describe

    try:
        apply()
    except Exception as exc:
        raise UserError(f"the executions that ended while the store was away could not be ended in it "
                        f"({describe(exc)}); check MLFLOW_TRACKING_URI and run sync again.") from None


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("run")(run_command)
    app.command("sync")(sync_command)
