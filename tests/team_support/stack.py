"""One team stack on 127.0.0.1 for the tests that need it (tests/integration, tests/ui): a Prefect
server that asks for its credential, the process worker of the suite flows, two long-lived team
workers, an MLflow server on a throwaway PostgreSQL database with basic auth, and the deployments.
Started once per test session (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SUITE = "team_test"
TYPED_RUN_NAME = "qa-typed-run-name"  # a manual run's name as a user types it in the Prefect form
SUITE_YAML = """\
description: team-mode test suite (tiny, fast frameworks)
datasets: [breast_cancer]
frameworks: [constant, hgb]
folds: 2
budget: test
"""
FLAKY = PROJECT_ROOT / "tests" / "run_support" / "flaky_adapter.py"


def postgres_up() -> bool:
    try:
        import psycopg2

        psycopg2.connect("postgresql://postgres@127.0.0.1:5432/postgres", connect_timeout=3).close()
        return True
    except Exception:
        return False


@dataclass
class Team:
    settings: Any  # ops.team_stack.StackSettings
    home: Path
    creds: dict[str, str]
    env: dict[str, str]  # what a client process needs: Prefect, MLflow (workers' account), team mode

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        """Read the MLflow store straight from PostgreSQL: the proof it is the backend."""
        import psycopg2

        url = f"{self.settings.pg_url}/{self.settings.db_prefix}_mlflow"
        with psycopg2.connect(url) as connection, connection.cursor() as cursor:
            cursor.execute(query, args)
            return cursor.fetchall()

    def job_runs(self, execution_id: str) -> list[tuple[str, str]]:
        """(job_key, status) of every live job run of an execution."""
        return self.sql(
            """SELECT k.value, s.value FROM runs r
               JOIN tags e ON e.run_uuid = r.run_uuid AND e.key = 'execution_id' AND e.value = %s
               JOIN tags k ON k.run_uuid = r.run_uuid AND k.key = 'job_key'
               JOIN tags s ON s.run_uuid = r.run_uuid AND s.key = 'status'
               WHERE r.lifecycle_stage = 'active'""", execution_id)


@contextmanager
def running_team(built_catalog: Path, home: Path) -> Iterator[Team]:
    """The stack with its deployments, in a scratch project at `home`; stopped and dropped after."""
    from ops import team_stack

    # A scratch project: the real cards, budgets and code, plus the test suite; runs stay in it.
    shutil.copytree(PROJECT_ROOT / "specs", home / "specs")
    (home / "specs" / "suites" / f"{SUITE}.yaml").write_text(SUITE_YAML)
    shutil.copy(PROJECT_ROOT / "prefect.yaml", home / "prefect.yaml")
    (home / "datasets").symlink_to(built_catalog)
    (home / "flows").symlink_to(PROJECT_ROOT / "flows")
    settings = team_stack.StackSettings(
        state_dir=home / ".team",
        prefect_port=team_stack.free_port(),
        mlflow_port=team_stack.free_port(),
        db_prefix=f"automl_eval_test_{uuid.uuid4().hex[:8]}",
        # One job at a time each: the killed-worker test knows what each worker holds.
        workers=[team_stack.WorkerSpec("cpu-1", "cpu", 1), team_stack.WorkerSpec("cpu-2", "cpu", 1)],
        worker_poll_s=2,
        extra_worker_env={"AUTOML_EVAL_HOME": str(home), "AUTOML_EVAL_GPU_LOCKS": str(home / "gpu-locks"),
                          "AUTOML_EVAL_HEARTBEAT_S": "1", "AUTOML_EVAL_EXTRA_ADAPTERS": str(FLAKY),
                          "FLAKY_HOLD": str(home / "hold")},
    )
    try:
        team_stack.up(settings)
        creds = team_stack.credentials(settings)
        env = {**os.environ, **team_stack.client_env(settings, creds), "AUTOML_EVAL_HOME": str(home),
               "PREFECT_LOGGING_LEVEL": "WARNING", "AUTOML_EVAL_EXTRA_ADAPTERS": str(FLAKY)}
        deployed = subprocess.run([str(BIN / "automl-eval"), "deploy"], cwd=home, env=env,
                                  capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout + deployed.stderr
        yield Team(settings, home, creds, env)
    finally:
        team_stack.down(settings.state_dir)
        team_stack.drop_databases(settings)
