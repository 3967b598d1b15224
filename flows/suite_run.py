"""A suite run from the terminal: the flow behind a progress bar, then the leaderboard and what next.

`automl-eval run` (flows/cli_run.py) imports this module only after it has set Prefect's and
MLflow's environment: both read their settings and log levels when they are first imported.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path
from typing import Any

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

from flows.benchmark import benchmark, check_execution_choice, resolve_plan, table_row
from flows.output import print_json, print_table
from flows.team_dispatch import choose_dispatcher
from tasks.tracking import suite_lock
from tasks.tracking.breaker import waiting_now

console = Console()


def _start_ephemeral_api() -> None:
    """Start Prefect's ephemeral API server now, one run of the project at a time.

    Two runs starting together would both migrate the project's `.prefect/` database, and one then
    timed out waiting for its server. Prefect reuses this server for the flow (one per process).
    """
    if os.environ.get("PREFECT_API_URL") or not os.environ.get("PREFECT_HOME"):
        return
    # Prefect's server (FastAPI, SQLAlchemy) only when this process serves the API itself.
    from prefect.server.api.server import SubprocessASGIServer

    with (Path(os.environ["PREFECT_HOME"]) / ".start.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        SubprocessASGIServer().start()


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
        # Only the total: a run in rounds raises it each round, with the jobs done kept.
        self._progress.update(self._task_id, total=count, description="jobs")

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
        waiting = waiting_now()
        text = f"[yellow]{waiting.count} waiting on disk ({waiting.reason})[/]" if waiting.count else ""
        self._progress.update(self._task_id, waiting=text)


def print_leaderboard(rows: list[dict[str, Any]], suite: str, execution_id: str) -> None:
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


def run_suite(
    suite: str,
    *,
    frameworks: list[str] | None,
    datasets: list[str] | None,
    folds: int | None,
    budget: str | None,
    team: str | None,
    execution: str,
    retry_failed: bool,
    parallel: int | None,
    as_json: bool,
    started: float,
) -> None:
    """Plan (bad names: one sentence before Prefect starts), run the flow behind a progress bar, and
    print the leaderboard (or, with `as_json`, one JSON document)."""
    plan = resolve_plan(suite, frameworks, datasets, folds, budget)
    host_cores = len(os.sched_getaffinity(0))
    if plan.budget.cores > host_cores and not as_json:
        # An AMLB constraint (8 cores) on a smaller host: the jobs run, sharing cores, but their times
        # are not those of the constraint; say so before the first job rather than after the last.
        console.print(f"[yellow]budget {plan.budget.name} asks for {plan.budget.cores} cores per job and "
                      f"this host has {host_cores}: jobs share cores, so their times are not the budget's."
                      "[/]", highlight=False)
    if plan.adaptive_note and not as_json:
        console.print(f"[yellow]{plan.adaptive_note}[/]", highlight=False)
    suite_lock.hold(plan.suite.name)  # the same suite twice at once: one sentence, before Prefect starts
    check_execution_choice(suite, execution, retry_failed)
    _start_ephemeral_api()
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("eta"), TimeRemainingColumn(), TextColumn("{task.fields[running]}"),
               TextColumn("{task.fields[waiting]}")]
    progress_console = Console(stderr=True) if as_json else console  # stdout holds only the JSON
    with Progress(*columns, console=progress_console, transient=False) as progress:
        bar = ProgressBar(progress)
        outcome = benchmark(suite, frameworks=frameworks, datasets=datasets, folds=folds,
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
