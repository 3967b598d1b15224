"""`automl-eval cluster up | down | status | exec HOST -- COMMAND`: a team across hosts on this machine.

The hosts are network namespaces with folders of their own (ops/cluster.py): `control` runs the
servers and the object store, `cpu-a` and `cpu-b` the team workers, `client` is where a person
types. `make cluster-up` / `make cluster-down` call the first two.
"""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table

from ops import cluster
from tasks.errors import UserError

console = Console()
cluster_app = typer.Typer(help="A team across hosts on this machine: network namespaces, no shared disk, "
                          "TLS, an S3 store.", no_args_is_help=True)


@cluster_app.command("up")
def cluster_up() -> None:
    """Make the hosts, start control's servers and store, seed and pull the data, start the workers."""
    settings = cluster.default_settings()
    state = cluster.up(settings)
    console.print(f"hosts:       {', '.join(f'{h} {a}' for h, a in state.addresses.items())}")
    console.print(f"Prefect UI:  {state.prefect_ui}  (TLS; CA {settings.ca_file})")
    console.print(f"MLflow UI:   {state.mlflow_ui}  (TLS, basic auth; accounts in "
                  f"{settings.root / cluster.CREDENTIALS_FILE})")
    console.print(f"object store: {state.s3}")
    console.print(f"started in:  {', '.join(f'{k} {v:.1f} s' for k, v in state.timings_s.items())}")
    console.print("next:        automl-eval cluster exec client -- automl-eval run smoke")


@cluster_app.command("down")
def cluster_down(
    remove: bool = typer.Option(False, "--remove", help="Also delete the hosts' folders (.cluster/)."),
) -> None:
    """Stop every process of every host and remove the namespaces and the bridge."""
    settings = _settings()
    stopped = cluster.down(settings, remove_folders=remove)
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "no cluster process was running.")


@cluster_app.command("status")
def cluster_status() -> None:
    """Each host: its address and what runs there."""
    settings = _settings()
    state = cluster.read_state(settings.root)
    if state is None:
        console.print(f"no cluster is up from {settings.root} (start one with `make cluster-up`).")
        return
    table = Table("host", "address", "processes", "started here")
    for host in cluster.HOSTS:
        started = ", ".join(name.split("/", 1)[1] for name in state.pids if name.startswith(f"{host}/"))
        running = len(cluster.host_pids(settings, host))
        table.add_row(host, state.addresses[host], str(running), started or "-")
    console.print(table)
    console.print(f"Prefect {state.prefect_ui}, MLflow {state.mlflow_ui}, S3 {state.s3}")


@cluster_app.command("exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def cluster_exec(
    context: typer.Context,
    host: str = typer.Argument(..., help=f"One of: {', '.join(cluster.HOSTS)}."),
) -> None:
    """Run a command on a host (its folders, its address, the team's settings), e.g.
    `automl-eval cluster exec client -- automl-eval run smoke`."""
    command = context.args[1:] if context.args[:1] == ["--"] else list(context.args)
    if not command:
        raise UserError("cluster exec: name a command after the host, e.g. "
                        "`automl-eval cluster exec client -- automl-eval run smoke`.")
    raise typer.Exit(cluster.exec_on(_settings(), host, command))


def _settings() -> cluster.ClusterSettings:
    default = cluster.default_settings()
    state = cluster.read_state(default.root)
    return cluster.settings_of(state) if state is not None else default


def register(app: typer.Typer) -> None:
    """Add this module's commands to the root app."""
    app.add_typer(cluster_app, name="cluster")
