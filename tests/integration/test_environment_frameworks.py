"""The frameworks that run in environments of their own (tpot, mljar, lightautoml, tabpfn, tabm,
realmlp) through the whole job path: the worker started with the environment's Python, the watchdog,
the harness's scores, a model folder that says which environment made it. One dataset each, its tiny
test settings.

Each is skipped, with its install command, where its environment is not installed (minutes of pip
each: `automl-eval frameworks install NAME@VERSION`); tabpfn also where its weights are not in place.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from jobs_support.tiny_project import REPO_ROOT, make_project

from tasks.frameworks.environments import ENVIRONMENT_FILE
from tasks.frameworks.registry import find_environment, get_adapter
from tasks.frameworks.tabpfn import weights_problem
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import MODEL_DIR, JobResult
from tasks.specs import Budget

pytestmark = [pytest.mark.integration, pytest.mark.heavy]
# The test settings bound each search (a few pipelines, models or algorithms); the time is a ceiling.
BUDGET = Budget(name="tiny-env", time_s=120, cores=1, memory_mb=4096)
CASES = [("tpot", "1.1.0", "binary"), ("mljar", "1.3.2", "multiclass"),
         ("lightautoml", "0.4.2", "regression"), ("tabpfn", "2.2.1", "binary"),
         ("tabm", "1.7.3", "multiclass"), ("realmlp", "1.7.3", "regression")]


@pytest.mark.parametrize(("framework", "version", "problem_type"), CASES,
                         ids=[f"{name}@{version}" for name, version, _ in CASES])
def test_a_framework_in_its_own_environment_runs_a_scored_job(
    framework: str, version: str, problem_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The checkout's environments, whatever project root the job itself gets.
    venvs = os.environ.get("AUTOML_EVAL_VENVS_DIR", str(REPO_ROOT / ".venvs"))
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", venvs)
    environment = find_environment(framework, version)
    if environment.state().status != "installed":
        pytest.skip(f"{environment.id} is not installed; install it with `{environment.install_command}`")
    if framework == "tabpfn" and weights_problem(problem_type):
        pytest.skip(weights_problem(problem_type) or "")
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=120)[problem_type]
    adapter = get_adapter(framework)
    job = Job("environments", spec.name, "v0", framework, None, 0, 0, BUDGET, adapter.test_params(),
              framework_version=version)

    result = run_job(job, spec, tmp_path / "job")

    assert result.status == "ok", result.error
    assert result == JobResult.load(tmp_path / "job")
    assert result.framework_version == version
    assert np.isfinite(result.scores["result"]) and result.costs["fit_s"] > 0
    assert result.info["python"].startswith(str(environment.folder))
    assert (tmp_path / "job" / MODEL_DIR / ENVIRONMENT_FILE).is_file()
