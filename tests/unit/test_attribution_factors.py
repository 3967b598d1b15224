"""How an attribution makes a factor take its old value, without running a job: the bisection over
framework releases, a release's environment derived from a declared one, an older commit's code in
a git worktree (and the commits it refuses), and the host kinds that can run here."""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path

import pytest

from flows.attribution_factors import (
    checkout_commit,
    commit_worktrees,
    unavailable_host_kind,
    why_commit_unrunnable,
)
from tasks.errors import UserError
from tasks.frameworks.environments import MARKER_FILE, EnvironmentSpec
from tasks.frameworks.registry import find_environment
from tasks.launch import WORKER_CODE_ENV, chosen_launcher, python_environment
from tasks.report.counterfactuals import bisect_releases
from tasks.resources import cpu_model

RELEASES = ["1.1", "1.2", "1.3", "1.4", "1.5", "1.6"]


def _measure_with_change_at(first_bad: str, tried: list[str]):  # noqa: ANN202
    def measure(release: str) -> float:
        tried.append(release)
        return 0.6 if RELEASES.index(release) >= RELEASES.index(first_bad) else 0.95

    return measure


@pytest.mark.parametrize("first_bad", RELEASES)
def test_the_bisection_names_the_first_release_like_the_new_version(first_bad: str) -> None:
    tried: list[str] = []
    measure = _measure_with_change_at(first_bad, tried)
    found = bisect_releases("hgb", "1.0", "1.7", RELEASES, 0.95, 0.6, measure, max_steps=10)
    assert found.first_new == first_bad
    index = RELEASES.index(first_bad)
    assert found.last_old == (RELEASES[index - 1] if index else "1.0")
    assert not found.untried and not found.stopped
    assert len(tried) <= math.ceil(math.log2(len(RELEASES) + 1))  # a bisection, not a scan
    assert f"the change came with hgb {first_bad}" in found.sentence()


def test_the_job_cap_stops_the_bisection_and_says_what_was_not_tried() -> None:
    tried: list[str] = []
    found = bisect_releases("hgb", "1.0", "1.7", RELEASES, 0.95, 0.6, _measure_with_change_at("1.5", tried),
                            max_steps=1)
    assert tried == ["1.3"]  # the middle, like the old version
    assert found.untried == ["1.4", "1.5", "1.6"] and found.first_new == "1.7"
    said = found.sentence()
    assert "between 1.3 and 1.7; not tried: 1.4, 1.5, 1.6 (the job cap allowed 1 releases)" in said


def test_a_release_that_cannot_run_stops_the_bisection_with_its_reason() -> None:
    found = bisect_releases("hgb", "1.0", "1.7", RELEASES, 0.95, 0.6,
                            lambda release: f"No matching distribution found for scikit-learn=={release}",
                            max_steps=5)
    assert [s.release for s in found.steps] == ["1.3"] and math.isnan(found.steps[0].value)
    assert found.untried == RELEASES and "1.3 could not run: No matching distribution" in found.stopped


def test_a_release_environment_is_derived_from_a_declared_one_and_found_once_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    spec = EnvironmentSpec("1.7.2", ("scikit-learn==1.7.2",), ("sklearn.ensemble",))
    derived = spec.release("1.9.0")
    assert derived is not None and derived.requirements == ("scikit-learn==1.9.0",)
    assert derived.version == "1.9.0" and derived.release_of == "1.7.2"
    assert EnvironmentSpec("1.0", ("some-wheel>=1",), ()).release("2.0") is None  # nothing pins it

    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path))
    with pytest.raises(UserError, match="no environment for version '1.9.0'"):
        find_environment("hgb", "1.9.0")  # a release is not a suite's version until installed
    folder = tmp_path / "hgb-1.9.0"
    (folder / "bin").mkdir(parents=True)
    (folder / MARKER_FILE).write_text(json.dumps({"requirements": ["scikit-learn==1.9.0"],
                                                  "release_of": "1.8.0"}))
    found = find_environment("hgb", "1.9.0")
    assert found.folder == folder and found.spec.requirements == ("scikit-learn==1.9.0",)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", message)
    return _git(repo, "rev-parse", "HEAD").strip()


def test_an_older_commit_runs_from_a_worktree_under_the_project_unless_its_schema_moved(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "project"
    repo.mkdir()
    _git(repo, "init", "-q")
    old = _commit(repo, {"tasks/specs.py": "A = 1\n", "tasks/frameworks/hgb.py": "ROUNDS = 3\n"}, "old")
    adapter_only = _commit(repo, {"tasks/frameworks/hgb.py": "ROUNDS = 100\n"}, "adapter")
    assert checkout_commit(repo) == adapter_only
    assert why_commit_unrunnable(repo, old, adapter_only) is None
    moved = _commit(repo, {"tasks/specs.py": "A = 2\n", "tasks/data/load.py": "x = 1\n"}, "schema")
    why = why_commit_unrunnable(repo, old, moved)
    assert why is not None and why.startswith("the data layer and the suite schema moved between commit")
    assert "tasks/data/load.py, tasks/specs.py" in why
    assert "not in this clone" in (why_commit_unrunnable(repo, "f" * 40, moved) or "")
    assert "recorded no project commit" in (why_commit_unrunnable(repo, "unknown", moved) or "")
    assert "is not a git checkout" in (why_commit_unrunnable(tmp_path / "elsewhere", old, "") or "")

    folder = repo / "runs" / "attribution" / "x"
    with commit_worktrees(repo, folder) as code_at:
        tree = code_at(old)
        assert tree.parent == folder and code_at(old) == tree  # made once per commit
        assert (tree / "tasks" / "frameworks" / "hgb.py").read_text() == "ROUNDS = 3\n"
        assert len(_git(repo, "worktree", "list").splitlines()) == 2
    assert not tree.exists()
    assert len(_git(repo, "worktree", "list").splitlines()) == 1
    assert (repo / "tasks" / "frameworks" / "hgb.py").read_text() == "ROUNDS = 100\n"  # checkout untouched


def test_a_worker_of_another_commit_imports_that_code_and_starts_cold(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.delenv(WORKER_CODE_ENV, raising=False)
    monkeypatch.setenv("AUTOML_EVAL_LAUNCHER", "warm")
    assert chosen_launcher() == "warm"
    monkeypatch.setenv(WORKER_CODE_ENV, str(tmp_path))
    assert chosen_launcher() == "cold"
    assert python_environment(1)["PYTHONPATH"].split(":")[0] == str(tmp_path)


def test_only_this_machines_host_kind_is_available() -> None:
    assert unavailable_host_kind(f"{cpu_model()} / none") is None
    assert unavailable_host_kind("") is None  # not recorded: nothing to refuse
    why = unavailable_host_kind("Imaginary CPU 9000 / none")
    assert why is not None and why.startswith("host kind 'Imaginary CPU 9000 / none' is not available here")
    why = unavailable_host_kind(f"{cpu_model()} / NVIDIA Imaginary GPU")
    assert why is not None and "no NVIDIA Imaginary GPU" in why


def test_the_bisected_range_is_one_frameworks_two_versions_the_main_environment_read_as_its_version() -> None:
    # Inside: it imports Prefect, whose settings a test sets first (configure_embedded_prefect).
    from flows.explain_regression import _version_range

    def planned(old: dict[str, str], new: dict[str, str]) -> dict:
        return {"base": {"framework_version": old}, "cand": {"framework_version": new}}

    assert _version_range(planned({"hgb": "1.7.2"}, {"hgb": "=1.9.1"})) == ("hgb", "1.7.2", "1.9.1")
    assert _version_range(planned({"hgb": "1.7.2", "rf": "=1.9.1"}, {"hgb": "1.8.0", "rf": "=1.9.1"})) == (
        "hgb", "1.7.2", "1.8.0")
    assert _version_range(planned({"hgb": "1.7.2", "rf": "1.7.2"}, {"hgb": "1.8.0", "rf": "1.8.0"})) is None
    assert _version_range(planned({"hgb": "1.7.2"}, {"rf": "1.8.0"})) is None  # not one framework's range
