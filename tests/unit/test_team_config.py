"""Team mode without servers: the deployments file, the manual form, the mode switch, the secrets."""

from __future__ import annotations

import importlib
import shutil
import stat
from pathlib import Path

import pytest
import yaml

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def test_prefect_yaml_declares_the_team_deployments() -> None:
    config = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in config["deployments"]}
    # Jobs are no deployments of their own: long-lived workers take them (flows/team_worker.py).
    assert set(deployments) == {"nightly", "manual"}
    assert deployments["nightly"]["schedules"][0]["timezone"] == "UTC"
    assert "schedules" not in deployments["manual"]
    assert {d["work_pool"]["name"] for d in deployments.values()} == {"cpu"}
    for deployment in deployments.values():
        # A module path, not a file path: Prefect imports a file's flow as a top-level module
        # ('deployments'), whose name then travels in each job's pickled context, and no worker can
        # import it (every job of a nightly dropped as unreadable: tests/integration/test_cluster.py).
        module, _, function = deployment["entrypoint"].rpartition(".")
        assert ":" not in module and "/" not in module, deployment["entrypoint"]
        assert callable(getattr(importlib.import_module(module), function))
    # The pull step is importable on every worker (it changes into the worker's own checkout).
    (step,) = config["pull"]
    module, _, name = next(iter(step)).rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))


def test_manual_form_offers_the_suites_and_budgets_as_choices(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.utilities.callables import parameter_schema

    shutil.copytree(PROJECT_ROOT / "specs", tmp_path / "specs")
    for name in ("alpha", "beta"):
        suite_file = tmp_path / "specs" / "suites" / f"{name}.yaml"
        suite_file.write_text("datasets: [penguins]\nframeworks: [constant]\n")
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path))
    import flows.deployments as deployments

    deployments = importlib.reload(deployments)
    try:
        schema = parameter_schema(deployments.manual).model_dump()
        properties = schema["properties"]
        suites = sorted(p.stem for p in (tmp_path / "specs" / "suites").glob("*.yaml"))
        assert properties["suite"]["enum"] == suites
        budget_choices = [a for a in properties["budget"]["anyOf"] if "enum" in a][0]["enum"]
        assert set(budget_choices) == set(yaml.safe_load((tmp_path / "specs" / "budgets.yaml").read_text()))
        assert properties["folds"]["anyOf"][0]["type"] == "integer"
        assert properties["frameworks"]["anyOf"][0]["type"] == "array"
        assert properties["team"]["type"] == "string"
    finally:
        monkeypatch.undo()
        importlib.reload(deployments)


def test_team_mode_without_a_prefect_server_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from flows.dispatch import JobContext
    from flows.team_dispatch import TeamDispatcher, choose_dispatcher
    from tasks.errors import UserError
    from tasks.plan import make_jobs
    from tasks.specs import Budget, FrameworkRef

    monkeypatch.setenv("AUTOML_EVAL_MODE", "team")
    jobs = make_jobs("s", {"penguins": "v"}, [FrameworkRef(name="constant")], 1, [0],
                     Budget(name="test", time_s=5, cores=1, memory_mb=512))
    contexts = {job.key: JobContext(execution={}, problem_type="multiclass", metric="logloss")
                for job in jobs}
    dispatcher = choose_dispatcher()
    assert isinstance(dispatcher, TeamDispatcher)
    with temporary_settings({PREFECT_API_URL: None}), pytest.raises(UserError, match="PREFECT_API_URL"):
        dispatcher.run(jobs, contexts)


def test_stack_secrets_come_from_the_environment_or_a_private_file(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from ops import team_stack

    settings = team_stack.StackSettings(state_dir=tmp_path / ".team")
    for name in (team_stack.ADMIN_PASSWORD_ENV, team_stack.WORKERS_PASSWORD_ENV, team_stack.FLASK_SECRET_ENV,
                 team_stack.PREFECT_AUTH_ENV):
        monkeypatch.delenv(name, raising=False)
    first = team_stack.credentials(settings)
    path = settings.state_dir / team_stack.CREDENTIALS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(first[team_stack.ADMIN_PASSWORD_ENV]) >= 12  # MLflow refuses shorter admin passwords
    assert team_stack.credentials(settings) == first  # generated once, then kept
    monkeypatch.setenv(team_stack.WORKERS_PASSWORD_ENV, "from-the-environment")
    assert team_stack.credentials(settings)[team_stack.WORKERS_PASSWORD_ENV] == "from-the-environment"
    env = team_stack.client_env(settings, team_stack.credentials(settings))
    assert env["MLFLOW_TRACKING_USERNAME"] == team_stack.WORKERS_USER
    assert env["AUTOML_EVAL_MODE"] == "team"
    # The Prefect server's credential: generated as user:secret (the UI asks for it whole), and
    # handed to clients under the client-side name; Prefect Cloud's API key never reaches them.
    auth = first[team_stack.PREFECT_AUTH_ENV]
    assert auth.startswith(f"{team_stack.PREFECT_USER}:") and len(auth.split(":", 1)[1]) >= 20
    assert env["PREFECT_API_AUTH_STRING"] == auth
    monkeypatch.setenv("PREFECT_API_KEY", "a-cloud-key")
    worker = team_stack.WorkerSpec("w", "cpu", 1)
    assert "PREFECT_API_KEY" not in team_stack.worker_env(settings, first, worker)
