"""The team's servers on one machine: Prefect server and MLflow server (PostgreSQL), both locked, and workers.

`make team-up` / `automl-eval team up` and the integration tests start the same stack from here, so
what the tests check is what a team runs. Everything binds to 127.0.0.1 unless told otherwise; state,
logs and process ids live under one folder (``.team/`` by default, git-ignored).

Workers: one Prefect process worker of pool `cpu` runs the suite flows (one process per suite),
and long-lived team workers (flows/team_worker.py, one per WorkerSpec) run their jobs.

Secrets (the Prefect server's auth string, the MLflow admin password, the workers' password, the
Flask secret key) come from the environment; any that is missing is generated once and kept in
``<state>/credentials.env`` (mode 600). Nothing here prints or logs a secret.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from base64 import b64encode
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil
import psycopg2

from tasks import paths
from tasks.errors import UserError
from tasks.gpus import visible_gpu_count

CPU_POOL = "cpu"
GPU_POOL = "gpu"
GPU_LIMIT = "gpu"  # the Prefect global concurrency limit: one slot per GPU of the gpu pool
ADMIN_USER = "admin"
WORKERS_USER = "automl-eval-worker"
# Environment names of the secrets; MLflow's own names where MLflow reads them.
ADMIN_PASSWORD_ENV = "MLFLOW_AUTH_ADMIN_PASSWORD"
WORKERS_PASSWORD_ENV = "AUTOML_EVAL_WORKER_PASSWORD"
FLASK_SECRET_ENV = "MLFLOW_FLASK_SERVER_SECRET_KEY"
PREFECT_AUTH_ENV = "PREFECT_SERVER_API_AUTH_STRING"  # the server's; clients send PREFECT_API_AUTH_STRING
PREFECT_USER = "automl-eval"
FLOW_WORKER = "flow-worker"  # the process worker that runs the suite flows
CREDENTIALS_FILE = "credentials.env"
STATE_FILE = "state.json"
PG_URL_ENV = "AUTOML_EVAL_PG_URL"
DEFAULT_PG_URL = "postgresql://postgres@127.0.0.1:5432"


@dataclass
class WorkerSpec:
    """A long-lived team worker: `pool` is its kind (cpu or gpu), `limit` the jobs it runs at once."""

    name: str
    pool: str
    limit: int


@dataclass
class StackSettings:
    state_dir: Path
    host: str = "127.0.0.1"
    prefect_port: int = 4200
    mlflow_port: int = 5050  # 5000 is `make ui`'s embedded viewer
    pg_url: str = DEFAULT_PG_URL  # server only, no database: the stack names its own databases
    db_prefix: str = "automl_eval"
    workers: list[WorkerSpec] = field(default_factory=list)
    gpus: int = 0  # GPUs across the gpu pool; the concurrency limit GPU_LIMIT gets this many slots
    worker_poll_s: int = 5
    suite_flows: int = 4  # suite flow runs at once on the process worker
    extra_worker_env: dict[str, str] = field(default_factory=dict)
    # The CA that signed the servers' certificates where they speak TLS (the cluster's, ops/cluster.py);
    # None: plain HTTP on 127.0.0.1, as `make team-up` runs.
    ca_file: Path | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.ca_file else "http"

    @property
    def prefect_api_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.prefect_port}/api"

    @property
    def prefect_ui_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.prefect_port}"

    @property
    def mlflow_url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.mlflow_port}"

    def database_url(self, purpose: str, driver: str) -> str:
        server = self.pg_url.replace("postgresql://", f"postgresql+{driver}://", 1)
        return f"{server}/{self.db_prefix}_{purpose}"

    @property
    def databases(self) -> list[str]:
        return [f"{self.db_prefix}_{purpose}" for purpose in ("prefect", "mlflow", "auth")]

    @property
    def artifacts_dir(self) -> Path:
        return self.state_dir / "artifacts"

    @property
    def logs_dir(self) -> Path:
        return self.state_dir / "logs"


def default_settings() -> StackSettings:
    """What `make team-up` starts: two cpu workers sharing the cores, and a gpu worker where this
    host has GPUs."""
    gpus = int(os.environ.get("AUTOML_EVAL_GPUS", visible_gpu_count()))
    cores = os.cpu_count() or 1
    share = max(1, cores // 2)
    workers = [WorkerSpec("cpu-1", CPU_POOL, share), WorkerSpec("cpu-2", CPU_POOL, share)]
    if gpus:
        workers.append(WorkerSpec("gpu-1", GPU_POOL, gpus))
    return StackSettings(
        state_dir=paths.project_root() / ".team",
        prefect_port=int(os.environ.get("AUTOML_EVAL_PREFECT_PORT", 4200)),
        mlflow_port=int(os.environ.get("AUTOML_EVAL_MLFLOW_PORT", 5050)),
        pg_url=os.environ.get(PG_URL_ENV, DEFAULT_PG_URL),
        workers=workers,
        gpus=gpus,
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ---------------------------------------------------------------- secrets


def stored_credentials(state_dir: Path) -> dict[str, str]:
    """What credentials.env holds (nothing when it is missing); never generates."""
    path = state_dir / CREDENTIALS_FILE
    stored: dict[str, str] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            name, sep, value = line.partition("=")
            if sep and not name.startswith("#"):
                stored[name.removeprefix("export ").strip()] = value.strip().strip("'")
    return stored


def credentials(settings: StackSettings) -> dict[str, str]:
    """The stack's secrets: from the environment, else from (or generated into) credentials.env."""
    path = settings.state_dir / CREDENTIALS_FILE
    stored = stored_credentials(settings.state_dir)
    wanted: dict[str, Callable[[], str]] = {
        PREFECT_AUTH_ENV: lambda: f"{PREFECT_USER}:{secrets.token_urlsafe(18)}",  # the UI asks for it whole
        ADMIN_PASSWORD_ENV: lambda: secrets.token_urlsafe(18),  # MLflow wants >= 12 characters
        WORKERS_PASSWORD_ENV: lambda: secrets.token_urlsafe(18),
        FLASK_SECRET_ENV: lambda: secrets.token_hex(24),
    }
    values = {name: os.environ.get(name) or stored.get(name) or make() for name, make in wanted.items()}
    if values != {k: stored.get(k) for k in wanted}:
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        lines = ["# automl-eval team stack secrets; keep private (mode 600)."]
        lines += [f"export {name}='{value}'" for name, value in values.items()]
        path.write_text("\n".join(lines) + "\n")
    return values


def client_env(settings: StackSettings, creds: dict[str, str]) -> dict[str, str]:
    """What a worker or a user needs to reach the stack (the workers' account)."""
    return {
        "PREFECT_API_URL": settings.prefect_api_url,
        "PREFECT_API_AUTH_STRING": creds[PREFECT_AUTH_ENV],
        "MLFLOW_TRACKING_URI": settings.mlflow_url,
        "MLFLOW_TRACKING_USERNAME": WORKERS_USER,
        "MLFLOW_TRACKING_PASSWORD": creds[WORKERS_PASSWORD_ENV],
        "AUTOML_EVAL_MODE": "team",
        # The team's Prefect server checks no CSRF token (its CSRF protection is off, Prefect's
        # default): a client that fetched one per connection spent a request per job on it.
        "PREFECT_CLIENT_CSRF_SUPPORT_ENABLED": "false",
        # The jobs' parameters and results: a suite flow and the workers on this host share them.
        # Across hosts, point PREFECT_TASKS_SCHEDULING_DEFAULT_STORAGE_BLOCK at shared storage.
        "PREFECT_LOCAL_STORAGE_PATH": str(settings.state_dir / "prefect-results"),
    }


def write_client_env(settings: StackSettings, creds: dict[str, str]) -> Path:
    """`source .team/client.env` points a shell at the stack (mode 600: it holds a password)."""
    path = settings.state_dir / "client.env"
    path.touch(mode=0o600, exist_ok=True)
    path.chmod(0o600)
    path.write_text("".join(f"export {k}='{v}'\n" for k, v in client_env(settings, creds).items()))
    return path


# ---------------------------------------------------------------- PostgreSQL


def ensure_databases(settings: StackSettings) -> None:
    """Create the stack's databases if missing (PostgreSQL must be up; the error says how)."""
    try:
        connection = psycopg2.connect(f"{settings.pg_url}/postgres", connect_timeout=5)
    except psycopg2.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "unreachable"
        raise UserError(
            f"PostgreSQL at {settings.pg_url} is not reachable ({first}); start it or set {PG_URL_ENV}."
        ) from None
    connection.autocommit = True  # CREATE DATABASE cannot run inside a transaction
    try:
        with connection.cursor() as cursor:
            for name in settings.databases:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
                if cursor.fetchone() is None:
                    cursor.execute(f'CREATE DATABASE "{name}"')
    finally:
        connection.close()


def drop_databases(settings: StackSettings) -> None:
    connection = psycopg2.connect(f"{settings.pg_url}/postgres", connect_timeout=5)
    connection.autocommit = True
    try:
        with connection.cursor() as cursor:
            for name in settings.databases:
                cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        connection.close()


# ---------------------------------------------------------------- processes


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _spawn(settings: StackSettings, name: str, argv: list[str], env: dict[str, str]) -> int:
    """Start a long-lived process in its own session (so stopping it stops its children too)."""
    settings.logs_dir.mkdir(parents=True, exist_ok=True)
    log = (settings.logs_dir / f"{name}.log").open("ab")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               env=env, cwd=str(paths.project_root()), start_new_session=True)
    log.close()
    return process.pid


def _base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update({"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "1",
                "PYTHONUNBUFFERED": "1"})
    # Secrets reach only the processes that need them, set explicitly below.
    # PREFECT_API_KEY is for Prefect Cloud: set, it would replace the auth string and be refused.
    for name in (ADMIN_PASSWORD_ENV, WORKERS_PASSWORD_ENV, FLASK_SECRET_ENV, "MLFLOW_TRACKING_PASSWORD",
                 PREFECT_AUTH_ENV, "PREFECT_API_AUTH_STRING", "PREFECT_API_KEY"):
        env.pop(name, None)
    return env


def tls_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """A client context that trusts exactly `ca_file` (and checks the server's name), or None for HTTP."""
    return ssl.create_default_context(cafile=str(ca_file)) if ca_file else None


def wait_http(url: str, alive: Any, what: str, log: Path, timeout_s: float = 180,
              ca_file: Path | None = None) -> None:
    """Until `url` answers 200; `alive()` False means the server stopped (its log says why)."""
    deadline = time.monotonic() + timeout_s
    context = tls_context(ca_file)
    while time.monotonic() < deadline:
        if not alive():
            raise UserError(f"{what} stopped while starting; see {log}.")
        try:
            with urllib.request.urlopen(url, timeout=3, context=context) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.5)
    raise UserError(f"{what} did not answer on {url} within {timeout_s:.0f} s; see {log}.")


def _wait_http(url: str, pid: int, what: str, settings: StackSettings, timeout_s: float = 180) -> None:
    log = settings.logs_dir / f"{what}.log"
    wait_http(url, lambda: is_alive(pid), what, log, timeout_s, settings.ca_file)


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie we started is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


# Prefect server services the team does not use, switched off. Each runs a loop against the database
# whether or not anything happens (automations' triggers, paused runs' expiry), and the event
# persister writes every event (about ten per job) to PostgreSQL although nothing here reads them
# back: the task-run recorder takes task states from the event stream itself, as suites waiting on
# jobs do. Measured on the cluster (docs/benchmarks.md): the largest fixed share of the control plane.
QUIET_PREFECT_SERVER = {
    "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "false",
    "PREFECT_SERVER_SERVICES_PAUSE_EXPIRATIONS_ENABLED": "false",
}


def start_prefect_server(settings: StackSettings, creds: dict[str, str]) -> int:
    env = _base_env()
    env.update(QUIET_PREFECT_SERVER)
    env.update({
        PREFECT_AUTH_ENV: creds[PREFECT_AUTH_ENV],
        "PREFECT_HOME": str(settings.state_dir / "prefect"),
        "PREFECT_API_DATABASE_CONNECTION_URL": settings.database_url("prefect", "asyncpg"),
        "PREFECT_API_URL": settings.prefect_api_url,
    })
    argv = prefect_server_argv(str(paths.project_root()), settings.host, settings.prefect_port, None)
    return _spawn(settings, "prefect-server", argv, env)


def prefect_server_argv(app_dir: str, host: str, port: int, tls: tuple[str, str] | None) -> list[str]:
    """The Prefect server's command: Prefect's app as ops/prefect_server.py serves it (its task-run
    queues wake on arrival instead of polling), under uvicorn, with TLS where given."""
    argv = [sys.executable, "-m", "uvicorn", "--app-dir", app_dir,
            "--factory", "ops.prefect_server:create_app", "--host", host, "--port", str(port),
            "--timeout-keep-alive", "5"]
    return argv + (["--ssl-certfile", tls[0], "--ssl-keyfile", tls[1]] if tls else [])


def write_auth_config(settings: StackSettings) -> Path:
    """MLflow's basic-auth config: users in PostgreSQL; authenticated users read, granted users write."""
    path = settings.state_dir / "basic_auth.ini"
    path.write_text(
        "[mlflow]\n"
        "default_permission = READ\n"
        f"database_uri = {settings.database_url('auth', 'psycopg2')}\n"
        f"admin_username = {ADMIN_USER}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
        # Without it every request re-checks the password hash (about 0.2 s of server CPU): a job's
        # record, some 20 requests, took 9 s. At 60 s, each expiry made every waiting request re-hash
        # at once: a fifth of the server's CPU under py-spy with 8 workers. A changed password is
        # honoured at once by the server process that took it, by the others within ten minutes.
        "auth_cache_ttl_seconds = 600\n"
    )
    return path


def start_mlflow_server(settings: StackSettings, creds: dict[str, str]) -> int:
    settings.artifacts_dir.mkdir(parents=True, exist_ok=True)
    env = _base_env()
    env.update({
        "MLFLOW_AUTH_CONFIG_PATH": str(write_auth_config(settings)),
        ADMIN_PASSWORD_ENV: creds[ADMIN_PASSWORD_ENV],
        FLASK_SECRET_ENV: creds[FLASK_SECRET_ENV],
        # The GenAI job runner is of no use here and starts half a dozen processes.
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
    })
    argv = [
        _bin("mlflow"), "server", "--app-name", "team-auth",
        "--host", settings.host, "--port", str(settings.mlflow_port), "--workers", "2",
        "--backend-store-uri", settings.database_url("mlflow", "psycopg2"),
        "--artifacts-destination", str(settings.artifacts_dir),
    ]
    return _spawn(settings, "mlflow-server", argv, env)


def worker_env(settings: StackSettings, creds: dict[str, str], worker: WorkerSpec) -> dict[str, str]:
    env = _base_env()
    env.update(client_env(settings, creds))
    env.update({
        "PREFECT_HOME": str(settings.state_dir / "prefect-workers"),
        "PREFECT_WORKER_QUERY_SECONDS": str(settings.worker_poll_s),
        "AUTOML_EVAL_HOME": str(paths.project_root()),
        "AUTOML_EVAL_WORKER_NAME": worker.name,
        "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT": "true",  # a "View run" line per job, in every job log
    })
    env.update(settings.extra_worker_env)
    return env


def start_worker(settings: StackSettings, creds: dict[str, str], worker: WorkerSpec) -> int:
    """A long-lived team worker (flows/team_worker.py): it takes jobs, never a process per job."""
    argv = [sys.executable, "-m", "flows.team_worker", "--name", worker.name, "--kind", worker.pool,
            "--limit", str(worker.limit)]
    return _spawn(settings, f"worker-{worker.name}", argv, worker_env(settings, creds, worker))


def start_flow_worker(settings: StackSettings, creds: dict[str, str]) -> int:
    """The process worker of pool `cpu` that runs the suite flows (nightly, manual)."""
    spec = WorkerSpec(FLOW_WORKER, CPU_POOL, settings.suite_flows)
    argv = [_bin("prefect"), "worker", "start", "--pool", CPU_POOL, "--type", "process",
            "--name", FLOW_WORKER, "--limit", str(settings.suite_flows)]
    return _spawn(settings, FLOW_WORKER, argv, worker_env(settings, creds, spec))


# ---------------------------------------------------------------- what the servers must hold


def _mlflow_request(settings: StackSettings, method: str, path: str, body: dict[str, Any],
                    user: str, password: str) -> int:
    token = b64encode(f"{user}:{password}".encode()).decode()
    request = urllib.request.Request(
        f"{settings.mlflow_url}{path}", method=method, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": f"Basic {token}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=15, context=tls_context(settings.ca_file)) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def ensure_workers_user(settings: StackSettings, creds: dict[str, str]) -> None:
    """The account workers log with: created once, and made an admin so it may write to every
    experiment whoever created it (users keep the default READ unless granted more)."""
    admin = (ADMIN_USER, creds[ADMIN_PASSWORD_ENV])
    status = _mlflow_request(settings, "POST", "/api/2.0/mlflow/users/create",
                             {"username": WORKERS_USER, "password": creds[WORKERS_PASSWORD_ENV]}, *admin)
    if status not in (200, 400):  # 400: it exists already
        raise UserError(f"MLflow refused to create the workers' account (HTTP {status}); "
                        f"check {ADMIN_PASSWORD_ENV} matches the server's admin password.")
    if status == 400:  # existing account: make sure it has this password
        _mlflow_request(settings, "PATCH", "/api/2.0/mlflow/users/update-password",
                        {"username": WORKERS_USER, "password": creds[WORKERS_PASSWORD_ENV]}, *admin)
    status = _mlflow_request(settings, "PATCH", "/api/2.0/mlflow/users/update-admin",
                             {"username": WORKERS_USER, "is_admin": True}, *admin)
    if status != 200:
        raise UserError(f"MLflow refused to grant the workers' account write access (HTTP {status}).")


def ensure_pools_and_limits(api_url: str, gpus: int, auth_string: str | None = None,
                            ca_file: Path | None = None) -> None:
    """Work pools `cpu` and `gpu` (process type) and the GPU concurrency limit, idempotently.
    `auth_string`: the server's, where this process's settings do not carry it; `ca_file`: the CA
    of a server that speaks TLS."""
    # Prefect takes seconds to import; the CLI loads this module for every command, not only deploy.
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import (
        GlobalConcurrencyLimitCreate,
        GlobalConcurrencyLimitUpdate,
        WorkPoolCreate,
    )
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound
    from prefect.settings import (
        PREFECT_API_AUTH_STRING,
        PREFECT_API_SSL_CERT_FILE,
        PREFECT_API_URL,
        temporary_settings,
    )
    from prefect.workers.process import ProcessWorker

    updates: dict[Any, Any] = {PREFECT_API_URL: api_url}
    if auth_string:
        updates[PREFECT_API_AUTH_STRING] = auth_string
    if ca_file:
        updates[PREFECT_API_SSL_CERT_FILE] = str(ca_file)
    with temporary_settings(updates), get_client(sync_client=True) as client:
        template = ProcessWorker.get_default_base_job_template()
        for pool in (CPU_POOL, GPU_POOL):
            with contextlib.suppress(ObjectAlreadyExists):
                client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))
        try:
            client.read_global_concurrency_limit_by_name(GPU_LIMIT)
            client.update_global_concurrency_limit(GPU_LIMIT, GlobalConcurrencyLimitUpdate(limit=gpus))
        except ObjectNotFound:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=GPU_LIMIT, limit=gpus))


# ---------------------------------------------------------------- up, down, state


@dataclass
class StackState:
    prefect_ui: str
    prefect_api: str
    mlflow_ui: str
    pids: dict[str, int]
    settings: dict[str, Any]


def _state_path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def read_state(state_dir: Path) -> StackState | None:
    path = _state_path(state_dir)
    if not path.is_file():
        return None
    return StackState(**json.loads(path.read_text()))


def _save_state(settings: StackSettings, pids: dict[str, int]) -> StackState:
    state = StackState(settings.prefect_ui_url, settings.prefect_api_url, settings.mlflow_url, pids,
                       {**asdict(settings), "state_dir": str(settings.state_dir)})
    _state_path(settings.state_dir).write_text(json.dumps(asdict(state), indent=2, default=str))
    return state


def up(settings: StackSettings) -> StackState:
    """Start the stack (servers first, then workers); stop what started if anything fails."""
    existing = read_state(settings.state_dir)
    if existing and any(is_alive(pid) for pid in existing.pids.values()):
        raise UserError(f"a team stack is already running from {settings.state_dir} "
                        f"(Prefect {existing.prefect_ui}); stop it first with `make team-down`.")
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    creds = credentials(settings)
    ensure_databases(settings)
    pids: dict[str, int] = {}
    try:
        pids["prefect-server"] = start_prefect_server(settings, creds)
        pids["mlflow-server"] = start_mlflow_server(settings, creds)
        _save_state(settings, pids)
        _wait_http(f"{settings.prefect_api_url}/health", pids["prefect-server"], "prefect-server", settings)
        _wait_http(f"{settings.mlflow_url}/health", pids["mlflow-server"], "mlflow-server", settings)
        ensure_pools_and_limits(settings.prefect_api_url, settings.gpus, creds[PREFECT_AUTH_ENV])
        ensure_workers_user(settings, creds)
        pids[FLOW_WORKER] = start_flow_worker(settings, creds)
        for worker in settings.workers:
            pids[f"worker-{worker.name}"] = start_worker(settings, creds, worker)
        write_client_env(settings, creds)
        return _save_state(settings, pids)
    except BaseException:
        _stop_pids(pids)
        raise


def _tree(pid: int) -> list[Any]:
    """The process and every descendant (a worker's flow runs sit in sessions of their own)."""
    try:
        root = psutil.Process(pid)
        if os.getpgid(pid) != pid:  # not the session leader we started: the pid was reused
            return []
        return [root, *root.children(recursive=True)]
    except (psutil.NoSuchProcess, ProcessLookupError):
        return []


def _stop_pids(pids: dict[str, int], grace_s: float = 15, *, force: bool = False) -> list[str]:
    """Stop each process we started with its whole tree: SIGTERM (SIGKILL when `force`), then
    SIGKILL whatever is left after the grace period."""
    stopped, everything = [], []
    for name, pid in pids.items():
        tree = _tree(pid)
        if not tree:
            continue
        stopped.append(name)
        everything.extend(tree)
        for process in tree:
            with contextlib.suppress(psutil.Error):
                process.send_signal(signal.SIGKILL if force else signal.SIGTERM)
    _, alive = psutil.wait_procs(everything, timeout=grace_s)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=5)
    return stopped


def kill_process(state_dir: Path, name: str) -> None:
    """Kill one process of the stack and everything it started (a worker and its running jobs, as
    when its machine dies), leaving the others running."""
    state = read_state(state_dir)
    if state is None or name not in state.pids:
        raise UserError(f"no process '{name}' in {_state_path(state_dir)}.")
    _stop_pids({name: state.pids[name]}, grace_s=5, force=True)


def down(state_dir: Path) -> list[str]:
    """Stop every process of the stack; the databases and artifacts stay for the next `up`."""
    state = read_state(state_dir)
    if state is None:
        return []
    servers = ("prefect-server", "mlflow-server")
    workers_first = dict(sorted(state.pids.items(), key=lambda item: item[0] in servers))
    stopped = _stop_pids(workers_first)
    _state_path(state_dir).unlink(missing_ok=True)
    return stopped


# ---------------------------------------------------------------- the deployments' pull step


def enter_checkout() -> dict[str, str]:
    """prefect.yaml's pull step, run by the worker before each flow run: change into this worker's
    checkout of the project (AUTOML_EVAL_HOME, else the installed one), so the deployments never
    hard-code a path and every machine may keep its checkout where it likes."""
    root = paths.project_root()
    if not (root / "specs").is_dir():
        raise UserError(f"{root} is not an automl-eval checkout (no specs/); "
                        "set AUTOML_EVAL_HOME on this worker.")
    os.chdir(root)
    return {"directory": str(root)}


def restart_worker(settings: StackSettings, creds: dict[str, str], worker: WorkerSpec) -> int:
    """Start a worker of the stack again (after it stopped or its machine came back)."""
    pid = start_worker(settings, creds, worker)
    state = read_state(settings.state_dir)
    if state is not None:
        state.pids[f"worker-{worker.name}"] = pid
        _state_path(settings.state_dir).write_text(json.dumps(asdict(state), indent=2, default=str))
    return pid
