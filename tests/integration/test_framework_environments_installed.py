"""Framework environments end to end: a real environment (scikit-learn at an older version) is
installed with pip, a suite runs `hgb@1.7.2` beside `hgb` from the main environment, and the record
says which version made each model; a broken environment is refused before any job runs.

The environment is installed once per test session (about 30 s with a warm pip cache) into a
folder shared through AUTOML_EVAL_VENVS_DIR.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from run_support.project import REPO_ROOT, add_suites, cli_env, executions, job_runs, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.heavy]  # over a minute each: make test-heavy (CI)

OLD = "1.7.2"
ENVIRONMENT = f"hgb@{OLD}"
SUITE = {"datasets": ["penguins"], "frameworks": [ENVIRONMENT, "hgb"], "folds": 1, "budget": "test"}


def _cli(home: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flows.cli", *args], cwd=REPO_ROOT,
                          env=cli_env(home, **extra_env), capture_output=True, text=True, timeout=900,
                          check=False)


@pytest.fixture(scope="session")
def old_sklearn_venvs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of framework environments holding hgb@1.7.2, installed by the real command."""
    venvs = tmp_path_factory.mktemp("venvs")
    installed = _cli(venvs, "frameworks", "install", ENVIRONMENT, AUTOML_EVAL_VENVS_DIR=str(venvs))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert f"{ENVIRONMENT}: installed in" in installed.stdout  # the progress line
    return venvs


def test_two_versions_run_side_by_side_and_compare_names_the_version(
    data_home, old_sklearn_venvs: Path,  # noqa: ANN001
) -> None:
    home = add_suites(data_home("penguins"), {"versions": SUITE})
    listed = run_cli(home, "frameworks", "list", "--json", AUTOML_EVAL_VENVS_DIR=str(old_sklearn_venvs))
    hgb = next(entry for entry in json.loads(listed.stdout) if entry["framework"] == "hgb")
    states = {row["environment"]: row["status"] for row in hgb["environments"]}
    assert states[ENVIRONMENT] == "installed" and states["hgb@1.8.0"] == "not installed"

    ran = run_cli(home, "run", "versions", AUTOML_EVAL_VENVS_DIR=str(old_sklearn_venvs))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    [execution] = executions(home, "versions")
    runs = {run.data.tags["framework"]: run for run in job_runs(home, execution.info.run_id)}
    assert set(runs) == {ENVIRONMENT, "hgb"}
    assert {run.data.tags["status"] for run in runs.values()} == {"ok"}
    # The version each worker really imported: the environment's, and the main environment's.
    assert runs[ENVIRONMENT].data.tags["framework_version"] == OLD
    assert runs["hgb"].data.tags["framework_version"] == metadata.version("scikit-learn") != OLD
    assert runs[ENVIRONMENT].data.tags["job_key"] != runs["hgb"].data.tags["job_key"]

    # The old model's folder says what made it and how to rebuild that environment.
    job_dir = home / "runs" / "versions" / runs[ENVIRONMENT].data.tags["job_key"]
    result = json.loads((job_dir / "result.json").read_text())
    assert result["info"]["python"].startswith(str(old_sklearn_venvs))
    model_dir = job_dir / "model"
    assert f"scikit-learn=={OLD}" in (model_dir / "environment-requirements.txt").read_text().splitlines()
    # The pyfunc model logged for it pins that environment's requirements (plus MLflow).
    artifacts = home / "mlflow" / "artifacts"
    logged = [path.read_text().splitlines() for path in artifacts.rglob("requirements.txt")]
    assert any(f"scikit-learn=={OLD}" in pins and f"mlflow=={metadata.version('mlflow')}" in pins
               for pins in logged)
    from tasks.frameworks.registry import ModelEnvironmentMismatch, load_saved_model

    with pytest.raises(ModelEnvironmentMismatch, match=f"scikit-learn {OLD} in the framework environment"):
        load_saved_model(model_dir)  # the main environment's scikit-learn is another version

    # Within the execution, the two versions compared: the version is the one differing factor.
    from tasks.report.compare import compare
    from tasks.tracking import read

    jobs = read.job_runs(execution_id=execution.info.run_id, uri=f"sqlite:///{home / 'mlflow' / 'mlflow.db'}")
    diagnosis = compare(jobs[jobs["framework"] == ENVIRONMENT], jobs[jobs["framework"] == "hgb"]).table
    assert len(diagnosis) and set(diagnosis["framework"]) == {f"{ENVIRONMENT} -> hgb"}
    assert diagnosis["differing factors"].eq(
        f"framework_version: {OLD} -> {metadata.version('scikit-learn')}").all()
    changed = diagnosis[diagnosis["main factor"] != "no change"]
    assert len(changed) and changed["main factor"].eq("framework_version").all()


def test_a_broken_environment_is_refused_in_one_sentence_before_any_job(
    data_home, old_sklearn_venvs: Path, tmp_path: Path,  # noqa: ANN001
) -> None:
    home = add_suites(data_home("penguins"), {"versions": SUITE})
    # A copy of the installed environment's record, whose Python is then deleted.
    venvs = tmp_path / "venvs"
    broken = venvs / f"hgb-{OLD}"
    (broken / "bin").mkdir(parents=True)
    for name in ("automl-eval-environment.json", "requirements.txt"):
        (broken / name).write_text((old_sklearn_venvs / f"hgb-{OLD}" / name).read_text())
    (broken / "bin" / "python").symlink_to(old_sklearn_venvs / f"hgb-{OLD}" / "bin" / "python")
    (broken / "bin" / "python").unlink()

    refused = run_cli(home, "run", "versions", AUTOML_EVAL_VENVS_DIR=str(venvs))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = " ".join(refused.stderr.split())
    assert message.count("error:") == 1 and "Traceback" not in message
    assert f"framework environment '{ENVIRONMENT}' is broken" in message
    assert "bin/python is missing" in message and f"automl-eval frameworks install {ENVIRONMENT}" in message
    assert executions(home, "versions") == []  # refused at the plan: no execution, no job


def test_an_install_that_pip_cannot_resolve_gives_its_reason(data_home, tmp_path: Path) -> None:  # noqa: ANN001
    # An adapter declaring a scikit-learn release that does not exist.
    adapter = tmp_path / "future_adapter.py"
    adapter.write_text(
        "from tasks.frameworks.environments import EnvironmentSpec\n"
        "from tasks.frameworks.hgb import HistGradientBoostingAdapter\n\n\n"
        "class FutureAdapter(HistGradientBoostingAdapter):\n"
        "    name = 'future'\n"
        "    environments = (EnvironmentSpec('99.0.0', ('scikit-learn==99.0.0',), ('sklearn',)),)\n\n\n"
        "ADAPTER = FutureAdapter()\n"
    )
    home = data_home("penguins")
    failed = run_cli(home, "frameworks", "install", "future@99.0.0",
                     AUTOML_EVAL_VENVS_DIR=str(tmp_path / "v"), AUTOML_EVAL_EXTRA_ADAPTERS=str(adapter))
    assert failed.returncode == 2, failed.stdout + failed.stderr
    message = " ".join(failed.stderr.split())
    assert "installing framework environment 'future@99.0.0' failed:" in message
    assert "scikit-learn==99.0.0" in message and "install.log" in message
