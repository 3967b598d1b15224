"""A scratch project for suite runs, the `automl-eval` command in a subprocess, and its record."""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
FLAKY_ADAPTER = Path(__file__).with_name("flaky_adapter.py")


def add_suites(home: Path, suites: dict[str, dict[str, Any]],
               budgets: dict[str, dict[str, int]] | None = None) -> Path:
    """Write suites (and extra budgets) into a project made by the `data_home` fixture."""
    (home / "specs" / "suites").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    if budgets:
        with (home / "specs" / "budgets.yaml").open("a") as handle:
            handle.write("\n" + yaml.safe_dump(budgets, default_flow_style=None))
    for name, fields in suites.items():
        (home / "specs" / "suites" / f"{name}.yaml").write_text(yaml.safe_dump(fields, sort_keys=False))
    (home / "pyproject.toml").touch()
    return home


# The project's embedded stores, where `automl-eval run` keeps them (PREFECT_HOME is the project's .prefect).
PREFECT_DB = Path(".prefect") / "prefect.db"
MLFLOW_DB = Path("mlflow") / "mlflow.db"
PREFECT_FIRST_START = ("from prefect.server.api.server import SubprocessASGIServer\n"
                       "server = SubprocessASGIServer()\nserver.start()\nserver.stop()\n")


@functools.cache
def _store_templates() -> Path:
    """Empty stores as the real tools leave them on first use, made once per test process: Prefect's
    database after its server's first start (every migration, the block types), MLflow's SQLite store
    after its first request. A fresh scratch project would otherwise pay both on its first run
    (about 8 CPU-seconds on this machine, some fifty times in `make test`)."""
    root = Path(tempfile.mkdtemp(prefix="store-templates-"))
    atexit.register(shutil.rmtree, root, True)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "MLFLOW_TRACKING_URI")}
    env.update(PREFECT_HOME=str(root / PREFECT_DB.parent), PREFECT_SERVER_ANALYTICS_ENABLED="false")
    env.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")  # a first start migrates
    (root / MLFLOW_DB.parent).mkdir(parents=True)
    mlflow_uri = f"sqlite:///{root / MLFLOW_DB}"
    mlflow_first_request = (f"from mlflow import MlflowClient\n"
                            f"MlflowClient({mlflow_uri!r}).search_experiments()\n")
    for code in (PREFECT_FIRST_START, mlflow_first_request):
        made = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                              timeout=600, check=False)
        assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    # Prefect's SQLite runs in WAL mode: fold the log into the database file, which alone is copied.
    with contextlib.closing(sqlite3.connect(root / PREFECT_DB)) as database:
        database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return root


def seed_stores(home: Path) -> Path:
    """Copies of the empty stores into a scratch project that has none yet."""
    templates = _store_templates()
    for store in (PREFECT_DB, MLFLOW_DB):
        if not (home / store).exists():
            (home / store).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(templates / store, home / store)
    return home


def cli_env(home: Path, **extra: str) -> dict[str, str]:
    seed_stores(home)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MLFLOW_TRACKING_URI", "PREFECT_API_URL", "PREFECT_HOME", "AUTOML_EVAL_RUNS_DIR")}
    # COLUMNS: the leaderboard is drawn for a wide terminal, as a user would see it.
    env.update(AUTOML_EVAL_HOME=str(home), AUTOML_EVAL_EXTRA_ADAPTERS=str(FLAKY_ADAPTER), COLUMNS="200")
    env.update(extra)
    return env


def run_cli(home: Path, *args: str, timeout: float = 600, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=REPO_ROOT,
                          env=cli_env(home, **extra_env), capture_output=True, text=True, timeout=timeout,
                          check=False)


def start_cli(home: Path, *args: str, **extra_env: str) -> subprocess.Popen[str]:
    """The command in its own process group, so a test can kill it at once, as a crash would."""
    return subprocess.Popen([sys.executable, "-m", "flows.cli", *args], cwd=REPO_ROOT,
                            env=cli_env(home, **extra_env), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)


def client(home: Path) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")


def executions(home: Path, suite: str) -> list[Any]:
    mlflow_client = client(home)
    experiment = mlflow_client.get_experiment_by_name(suite)
    if experiment is None:
        return []
    return list(mlflow_client.search_runs([experiment.experiment_id], "tags.execution_state LIKE '%'"))


def job_runs(home: Path, execution_id: str) -> list[Any]:
    """Every live child run of an execution (deleted ones are not returned)."""
    mlflow_client = client(home)
    experiment_id = mlflow_client.get_run(execution_id).info.experiment_id
    return list(mlflow_client.search_runs([experiment_id], f"tags.execution_id = '{execution_id}' "
                                          "and tags.job_key LIKE '%'", max_results=1000))
