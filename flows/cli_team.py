"""`automl-eval deploy` and `automl-eval team up|down|status`: the team's servers and deployments.

`deploy` registers the deployments of prefect.yaml (nightly, manual) on the Prefect server that
PREFECT_API_URL names, after making sure the work pools `cpu` and `gpu` and the GPU concurrency
limit exist. `team up` starts the whole stack on 127.0.0.1 (see ops/team_stack.py); `team status`
shows its processes and every team worker's last heartbeat.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from flows.deployments import DEPLOY_GPUS_ENV
from flows.team_worker import read_heartbeats
from ops import team_stack
from tasks import paths
from tasks.errors import UserError
from tasks.gpus import visible_gpu_count

DEFAULT_NIGHTLY_CRON = "0 2 * * *"  # 02:00 UTC
CRON_ENV = "AUTOML_EVAL_NIGHTLY_CRON"

console = Console()
team_app = typer.Typer(help="Start, stop and inspect the team stack on this machine (127.0.0.1).",
                       no_args_is_help=True)


def _api_url() -> str:
    # Prefect takes seconds to import, and every command registers this group: only team commands load it.
    from prefect.settings import PREFECT_API_URL

    url = PREFECT_API_URL.value()
    if not url:
        raise UserError("automl-eval deploy needs a Prefect server: set PREFECT_API_URL "
                        "(after `make team-up`: `source .team/client.env`).")
    return str(url)


def _server_health(api_url: str) -> None:
    # A team server behind TLS (the cluster's) is trusted through the CA its clients are given.
    ca_file = os.environ.get("PREFECT_API_SSL_CERT_FILE")
    context = team_stack.tls_context(Path(ca_file) if ca_file else None)
    try:
        with urllib.request.urlopen(f"{api_url.rstrip('/')}/health", timeout=10, context=context):
            return
    except (urllib.error.URLError, OSError):
        raise UserError(f"no Prefect server answers at {api_url} (PREFECT_API_URL); "
                        "start it with `make team-up` or `prefect server start`.") from None


def deploy(
    cron: str = typer.Option(None, help=f"Nightly schedule (cron, UTC); default ${CRON_ENV} "
                             f"or '{DEFAULT_NIGHTLY_CRON}'."),
    gpus: int = typer.Option(None, min=0, help="GPUs across the gpu pool's workers (the 'gpu' concurrency "
                             "limit); default $AUTOML_EVAL_GPUS or this host's GPUs."),
) -> None:
    """Register the nightly, manual and job deployments on the running Prefect server."""

    api_url = _api_url()
    _server_health(api_url)
    root = paths.project_root()
    if not (root / "prefect.yaml").is_file():
        raise UserError(f"{root / 'prefect.yaml'}: file not found; run deploy from the project's checkout.")
    gpu_count = gpus if gpus is not None else int(os.environ.get("AUTOML_EVAL_GPUS", visible_gpu_count()))
    team_stack.ensure_pools_and_limits(api_url, gpu_count)
    env = dict(os.environ)
    env[CRON_ENV] = cron or os.environ.get(CRON_ENV) or DEFAULT_NIGHTLY_CRON
    env.setdefault("AUTOML_EVAL_HOME", str(root))
    env[DEPLOY_GPUS_ENV] = str(gpu_count)  # the manual form lists GPU budgets only if the team has GPUs
    command = [str(Path(sys.executable).parent / "prefect"), "--no-prompt", "deploy", "--all"]
    completed = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True)
    if completed.returncode != 0:
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-15:])
        console.print(tail, markup=False, highlight=False)
        raise UserError("prefect deploy failed (its last lines are above); "
                        "check prefect.yaml and the server.")
    console.print(f"deployed nightly (cron '{env[CRON_ENV]}' UTC) and manual to {api_url}; "
                  f"'gpu' concurrency limit: {gpu_count}.")
    console.print("run one: prefect deployment run 'automl-eval-manual/manual' --param suite=smoke")


@team_app.command("up")
def team_up() -> None:
    """Start the Prefect server, the MLflow server (PostgreSQL, basic auth) and the workers."""
    settings = team_stack.default_settings()
    state = team_stack.up(settings)
    workers = ", ".join(f"{w.name} (pool {w.pool})" for w in settings.workers)
    console.print(f"Prefect UI:  {state.prefect_ui}")
    console.print(f"Prefect UI:  sign in with the value of PREFECT_SERVER_API_AUTH_STRING in "
                  f"{settings.state_dir}/credentials.env")
    console.print(f"MLflow UI:   {state.mlflow_ui}  "
                  f"(basic auth; accounts in {settings.state_dir}/credentials.env)")
    console.print(f"workers:     {workers}; logs in {settings.logs_dir}")
    console.print(f"next:        source {settings.state_dir}/client.env && automl-eval deploy")


@team_app.command("down")
def team_down() -> None:
    """Stop every process `team up` started (databases and artifacts stay)."""
    stopped = team_stack.down(paths.project_root() / ".team")
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "no team stack was running.")


@team_app.command("status")
def team_status() -> None:
    """The stack's processes on this machine, and every team worker's last heartbeat: host, kind,
    jobs running, jobs done."""
    state_dir = paths.project_root() / ".team"
    state = team_stack.read_state(state_dir)
    if state is not None:
        console.print(f"Prefect UI: {state.prefect_ui}\nMLflow UI:  {state.mlflow_ui}")
        for name, pid in state.pids.items():
            console.print(f"  {name:<20} pid {pid:<8} {'running' if team_stack.is_alive(pid) else 'stopped'}")
    api_url = os.environ.get("PREFECT_API_URL") or (state.prefect_api if state else "")
    if not api_url:
        console.print("no team stack is running here and PREFECT_API_URL is not set "
                      "(start the stack with `make team-up`, or `source .team/client.env`).")
        return
    auth = os.environ.get("PREFECT_API_AUTH_STRING") or \
        team_stack.stored_credentials(state_dir).get(team_stack.PREFECT_AUTH_ENV)
    _print_workers(api_url, auth)


def _print_workers(api_url: str, auth: str | None) -> None:
    # Prefect and the team worker (which imports it) load only for this command (see _api_url).
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_AUTH_STRING, PREFECT_API_URL, temporary_settings

    updates: dict[Any, Any] = {PREFECT_API_URL: api_url}
    if auth:
        updates[PREFECT_API_AUTH_STRING] = auth
    try:
        with temporary_settings(updates), get_client(sync_client=True) as client:
            beats = read_heartbeats(client)
    except Exception as exc:
        raise UserError(f"the Prefect server at {api_url} did not answer ({type(exc).__name__}); "
                        "is the stack up, and PREFECT_API_AUTH_STRING its credential?") from None
    if not beats:
        console.print("no team worker has reported yet.")
        return
    table = Table("worker", "host", "kind", "limit", "running", "done", "last heartbeat", "state")
    now = time.time()
    for beat in beats:
        table.add_row(beat.name, beat.host, beat.kind, str(beat.limit), str(len(beat.running)),
                      str(beat.done), f"{beat.age_s(now):.0f} s ago", "online" if beat.alive(now) else "lost")
    Console(width=max(console.width, 110)).print(table)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.command("deploy")(deploy)
    app.add_typer(team_app, name="team")
