"""The project commit as a factor: the older commit's adapter code runs from a git worktree.

The scratch project is a git repository holding a copy of this project's `tasks` package. At the
first commit hgb's adapter is planted with max_iter forced to 3; the second commit is the real
adapter. Each execution runs its commit's code (the recorded `git_sha` differs, nothing else). The
attribution re-runs both ends (`--rerun-ends`): the baseline mix must reproduce the first commit's
result, so its jobs ran the old adapter from a worktree under runs/attribution/, which is gone
afterwards. Then the commit moves the job-result schema: the old commit is skipped with the reason.
A host kind that is not available here is one sentence, exit 2, nothing run; in the nightly's path it
is a factor not varied.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
SUITE = "code-planted"
SUITE_YAML = (
    "datasets: [breast_cancer]\nframeworks: [{name: hgb, params: {max_iter: 100}}]\n"
    "folds: 1\nseeds: [0]\nbudget: test\n"
)
PLANT = ('model = estimator_class(**{**options, **params})',
         'model = estimator_class(**{**options, **params, "max_iter": 3})')


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _commit(repo: Path, message: str) -> str:
    _git(repo, "add", "tasks")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def test_an_older_commit_is_rerun_from_a_worktree_and_skipped_once_its_schema_moved(
    data_home,  # noqa: ANN001 - conftest fixture
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = data_home("breast_cancer")
    shutil.copy(ROOT / "specs" / "budgets.yaml", home / "specs" / "budgets.yaml")
    (home / "specs" / "suites").mkdir(exist_ok=True)
    (home / "specs" / "suites" / f"{SUITE}.yaml").write_text(SUITE_YAML)
    shutil.copytree(ROOT / "tasks", home / "tasks", ignore=shutil.ignore_patterns("__pycache__"))
    adapter = home / "tasks" / "frameworks" / "hgb.py"
    real = adapter.read_text()
    assert real.count(PLANT[0]) == 1
    adapter.write_text(real.replace(*PLANT))
    _git(home, "init", "-q")
    old = _commit(home, "hgb stops at 3 rounds")
    from flows.cli_run import configure_embedded_prefect

    configure_embedded_prefect()
    from flows.benchmark import benchmark
    from flows.explain_regression import explain, plan
    from tasks.errors import UserError
    from tasks.launch import WORKER_CODE_ENV
    from tasks.report.counterfactuals import unit_values
    from tasks.tracking import read
    from tasks.tracking.execution import git_sha

    def run_at_this_commit() -> str:
        git_sha.cache_clear()  # the harness reads its commit once per process
        monkeypatch.setenv(WORKER_CODE_ENV, str(home))  # the workers run the checkout's code
        try:
            return benchmark(SUITE, execution="new")["execution_id"]
        finally:
            monkeypatch.delenv(WORKER_CODE_ENV)

    def result(execution_id: str) -> float:
        runs = read.job_runs(execution_id=execution_id)
        assert (runs["status"] == "ok").all() and len(runs) == 1
        return float(unit_values(runs, "result").iloc[0])

    base_id = run_at_this_commit()
    adapter.write_text(real)
    new = _commit(home, "hgb as it is")
    cand_id = run_at_this_commit()
    assert read.execution(base_id)["git_sha"] == old and read.execution(cand_id)["git_sha"] == new
    assert result(base_id) != result(cand_id)  # 3 rounds against 100

    explanation = explain(base_id, cand_id, rerun_ends=True, max_jobs=2)
    assert explanation.factors == ["code"] and explanation.jobs_run == 2
    by_label = {m.label: m for m in explanation.mixes}
    assert by_label["baseline"].code == old and by_label["candidate"].code == new
    assert read.execution(by_label["baseline"].execution_id)["attribution_code"] == old
    # The old adapter really ran: the re-run baseline scores what the first commit scored.
    assert result(by_label["baseline"].execution_id) == pytest.approx(result(base_id), abs=1e-12)
    assert result(by_label["candidate"].execution_id) == pytest.approx(result(cand_id), abs=1e-12)
    [share] = explanation.attribution.shares[:1]
    assert share.factor == "code" and share.fraction == 1.0
    assert share.value == pytest.approx(result(cand_id) - result(base_id), abs=1e-12)
    worktrees = list((home / "runs" / "attribution").glob("*/code-*"))
    assert worktrees == [] and len(_git(home, "worktree", "list").splitlines()) == 1

    # The job result's schema moves after the candidate: the old commit can no longer be re-run.
    results_module = home / "tasks" / "results.py"
    results_module.write_text(results_module.read_text() + "\n# a field added\n")
    _commit(home, "the job result moved")
    with pytest.raises(UserError) as refused:
        explain(base_id, cand_id, rerun_ends=True, max_jobs=2)
    assert "no factor that can be re-run differs" in str(refused.value)
    assert f"the job result moved between commit {old[:12]}" in str(refused.value)
    assert "tasks/results.py" in str(refused.value)

    # Host kind: the baseline's jobs as if recorded on a machine of another kind.
    for run_id in read.job_runs(execution_id=base_id)["run_id"]:
        read.set_tag(run_id, "cpu_model", "Imaginary CPU 9000")
    monkeypatch.setattr(sys, "argv", ["automl-eval", "explain-regression", base_id, cand_id])
    from flows.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main()
    said = capsys.readouterr()
    assert exited.value.code == 2, said
    message = (said.out + said.err).strip()
    assert len(message.splitlines()) == 1
    assert "ran on different host kinds and host kind 'Imaginary CPU 9000 / none' is not available" in message
    with pytest.raises(UserError) as nightly:  # the nightly's way: a factor not varied, with why
        plan(base_id, cand_id, max_jobs=2, max_factors=4, refuse_unavailable_host=False)
    assert "hardware: Imaginary CPU 9000 / none ->" in str(nightly.value)
    assert "is not available here (this machine's CPU is" in str(nightly.value)
    assert read.executions(suite=f"{SUITE}-attribution")["execution_id"].nunique() == 2  # nothing more ran
