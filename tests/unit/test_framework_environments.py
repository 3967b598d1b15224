"""Framework environments without installing one: `name@version` in suites, job keys, and the
one-sentence refusals of the plan stage (unknown version, not installed, broken, wrong Python)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_support.project import add_suites

from tasks.environment_install import install, resolver_reason
from tasks.errors import UserError
from tasks.frameworks.environments import MARKER_FILE, EnvironmentSpec, FrameworkEnvironment, find_environment
from tasks.plan import Job, make_jobs
from tasks.specs import Budget, FrameworkRef, check_plain_names, load_suite

BUDGET = Budget(name="test", time_s=60, cores=1, memory_mb=2048)


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("hgb@1.7.2", ("hgb", None, "1.7.2")),
        ("autogluon:best_quality@1.5.0", ("autogluon", "best_quality", "1.5.0")),
        ("autogluon:best_quality", ("autogluon", "best_quality", None)),
        ({"name": "hgb@1.7.2", "params": {"max_iter": 3}}, ("hgb", None, "1.7.2")),
        ({"name": "hgb", "version": "1.8.0"}, ("hgb", None, "1.8.0")),
    ],
)
def test_a_suite_entry_names_a_version(entry: str | dict, expected: tuple) -> None:
    ref = FrameworkRef.parse(entry)
    assert (ref.name, ref.variant, ref.version) == expected
    assert FrameworkRef.parse(ref.id) == ref.model_copy(update={"params": {}})


def test_jobs_without_a_version_keep_their_keys_and_two_versions_get_distinct_ones() -> None:
    # Keys computed by the code before versions existed: recorded jobs still resume.
    old = Job("s", "penguins", "abc", "hgb", None, 0, 0, BUDGET, {"max_iter": 3})
    assert old.key == "086da2a887454d16"
    variant = Job("s", "penguins", "abc", "autogluon", "best_quality", 1, 2, BUDGET, {})
    assert variant.key == "be11c39c634662b0"
    refs = [FrameworkRef.parse(e) for e in ("hgb@1.7.2", "hgb@1.8.0", "hgb")]
    jobs = make_jobs("s", {"penguins": "abc"}, refs, 1, [0], BUDGET)
    assert [job.framework_id for job in jobs] == ["hgb@1.7.2", "hgb@1.8.0", "hgb"]
    assert len({job.key for job in jobs}) == 3
    assert Job.from_dict(jobs[0].to_dict()) == jobs[0]


@pytest.mark.parametrize("version", ["../x", "1.7/../../x", "", "1 2", "1@2"])
def test_a_version_that_is_not_plain_is_one_sentence_naming_the_field(data_home, version: str) -> None:  # noqa: ANN001
    suite = {"datasets": ["penguins"], "frameworks": [f"hgb@{version}"]}
    home = add_suites(data_home("penguins"), {"bad": suite})
    with pytest.raises(UserError, match=r"field 'frameworks\.0\.version'.*not a version") as caught:
        load_suite("bad")
    assert str(home / "specs" / "suites" / "bad.yaml") in str(caught.value)
    with pytest.raises(UserError, match="field 'frameworks'"):
        check_plain_names("--frameworks", frameworks=[f"hgb@{version}"])
    check_plain_names("--frameworks", frameworks=["hgb@1.7.2", "autogluon:best_quality@1.5.0+local"])


def test_an_unknown_version_names_the_known_ones() -> None:
    with pytest.raises(UserError) as caught:
        find_environment("hgb", "0.1")
    assert "no environment for version '0.1'" in str(caught.value)
    assert "hgb@1.7.2, hgb@1.8.0" in str(caught.value)
    with pytest.raises(UserError, match="declares no environment|no environment for version"):
        find_environment("constant", "1.7.2")


def _plan_refusal(home: Path, monkeypatch: pytest.MonkeyPatch, venvs: Path) -> str:
    from flows.benchmark import resolve_plan

    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(venvs))
    add_suites(home, {"versions": {"datasets": ["penguins"], "frameworks": ["hgb@1.7.2", "hgb"]}})
    with pytest.raises(UserError) as caught:
        resolve_plan("versions")
    return str(caught.value)


def test_an_environment_not_installed_is_refused_with_its_install_command(
    data_home, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,  # noqa: ANN001
) -> None:
    message = _plan_refusal(data_home("penguins"), monkeypatch, tmp_path / "venvs")
    assert message == ("framework environment 'hgb@1.7.2' is not installed; install it with "
                       "`automl-eval frameworks install hgb@1.7.2` "
                       "(or `make setup-frameworks` for all of them).")


@pytest.mark.parametrize("damage", ["no marker", "no python", "other requirements"])
def test_a_broken_environment_is_refused_in_one_sentence(
    data_home, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, damage: str,  # noqa: ANN001
) -> None:
    folder = tmp_path / "venvs" / "hgb-1.7.2"
    (folder / "bin").mkdir(parents=True)
    requirements = ["scikit-learn==1.6.0"] if damage == "other requirements" else ["scikit-learn==1.7.2"]
    if damage != "no marker":
        (folder / MARKER_FILE).write_text(json.dumps({"requirements": requirements}))
    if damage != "no python":
        (folder / "bin" / "python").symlink_to("/bin/true")  # runs, so only the record is wrong
    message = _plan_refusal(data_home("penguins"), monkeypatch, tmp_path / "venvs")
    assert message.startswith("framework environment 'hgb@1.7.2' is broken: ")
    assert message.endswith("reinstall it with `automl-eval frameworks install hgb@1.7.2`.")
    assert {"no marker": "install did not finish", "no python": "bin/python is missing",
            "other requirements": "the adapter now declares"}[damage] in message
    assert "\n" not in message


def test_a_python_version_that_is_not_here_is_refused_before_anything_is_made(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no python3.99 anywhere
    spec = EnvironmentSpec("1.7.2", ("scikit-learn==1.7.2",), ("sklearn",), python="3.99")
    with pytest.raises(UserError, match=r"needs Python 3\.99, which is not installed here"):
        install(FrameworkEnvironment("hgb", "scikit-learn", spec), progress=lambda line: None)
    assert not (tmp_path / "venvs").exists()


def test_the_resolver_reason_is_its_conflict_or_its_error_in_one_line() -> None:
    # pip's own words (pip 23 and 26) for a conflict and for a version that does not exist.
    conflict = """ERROR: Cannot install autogluon-tabular[catboost,lightgbm]==1.5.0 because these package \
versions have conflicting dependencies.

The conflict is caused by:
    autogluon-tabular[catboost,lightgbm] 1.5.0 depends on scipy<1.17 and >=1.5.4
    The user requested (constraint) scipy==1.17.1

To fix this you could try to:
ERROR: ResolutionImpossible: for help visit https://pip.pypa.io/en/latest/topics/dependency-resolution/
"""
    assert resolver_reason(conflict) == (
        "conflict: autogluon-tabular[catboost,lightgbm] 1.5.0 depends on scipy<1.17 and >=1.5.4; "
        "The user requested (constraint) scipy==1.17.1")
    missing = """WARNING: Location 'file:///opt/pypi/simple/scikit-learn/' is ignored
ERROR: Ignored the following versions that require a different python version: 1.8.0 Requires-Python >=3.12
ERROR: Could not find a version that satisfies the requirement scikit-learn==99.0.0 (from versions: 1.9.1)
ERROR: No matching distribution found for scikit-learn==99.0.0
"""
    assert resolver_reason(missing) == "No matching distribution found for scikit-learn==99.0.0"
