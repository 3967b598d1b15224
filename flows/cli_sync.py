"""`automl-eval sync`: log the job folders that finished but were never recorded in MLflow."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console

from tasks.errors import UserError
from tasks.tracking.breaker import describe, is_unreachable
from tasks.tracking.execution import apply_deferred_finishes
from tasks.tracking.job_folder import pending_job_dirs, waiting_reason
from tasks.tracking.job_run import log_job_dir
from tasks.tracking.suite_lock import running_elsewhere

console = Console()


def sync_command() -> None:
    """Log job folders that finished but were never recorded (e.g. the tracking server was down)."""
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
    try:
        apply()
    except Exception as exc:
        raise UserError(f"the executions that ended while the store was away could not be ended in it "
                        f"({describe(exc)}); check MLFLOW_TRACKING_URI and run sync again.") from None


def register(app: typer.Typer) -> None:
    """Add this module's command to the root app."""
    app.command("sync")(sync_command)
