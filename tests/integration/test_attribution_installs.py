"""An attribution's framework versions with the real pip: a version that is not installed is installed
into its environment first (here a scikit-learn release no adapter declares, derived from hgb's
declared environments, as the bisection does), with the seconds it took; a version pip refuses makes
the factor unrunnable with pip's own message; the releases between two versions come from
`pip index versions` through the machine's configured indexes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.attribution_factors import Installs
from flows.explain_regression import _why_unrunnable
from tasks.environment_install import releases_between
from tasks.errors import UserError
from tasks.frameworks.environments import MARKER_FILE
from tasks.frameworks.registry import find_environment

pytestmark = pytest.mark.integration
RELEASE = "1.9.0"  # scikit-learn: between hgb's declared 1.8.0 and the main environment's 1.9.1


def test_a_framework_version_pip_refuses_is_unrunnable_with_pips_message(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))
    installs = Installs()
    why = _why_unrunnable("framework_version", {"hgb": "0.0.1"}, {"hgb": "=1.9.1"}, tmp_path, installs)
    assert why is not None and why.startswith("installing framework environment 'hgb@0.0.1' failed: ")
    assert "scikit-learn==0.0.1" in why  # pip's own words about the version it cannot find
    assert "(full log: " in why and "\n" not in why
    assert installs.refused == {"hgb@0.0.1": why} and installs.seconds == {}
    assert installs.ensure("hgb", "0.0.1") == why  # tried once per attribution
    with pytest.raises(UserError, match="no environment for version '0.0.1'"):
        find_environment("hgb", "0.0.1")  # nothing half-made is taken for an environment


def test_a_framework_release_not_installed_is_installed_first_with_its_time(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    between, why = releases_between("scikit-learn", "1.7.2", "1.9.1")
    assert {"1.8.0", RELEASE} <= set(between) and why == ""
    assert all(version not in between for version in ("1.7.2", "1.9.1"))
    assert releases_between("scikit-learn", "1.7.2", "1.7.2") == ([], "no release of scikit-learn between "
                                                                      "1.7.2 and 1.7.2")

    monkeypatch.setenv("AUTOML_EVAL_VENVS_DIR", str(tmp_path / "venvs"))
    lines: list[str] = []
    installs = Installs()
    assert installs.ensure("hgb", RELEASE, lines.append) is None
    assert installs.seconds[f"hgb@{RELEASE}"] > 0
    assert any("is not installed: installing it" in line for line in lines)
    environment = find_environment("hgb", RELEASE)  # a suite (a mix) can now name it
    marker = json.loads((environment.folder / MARKER_FILE).read_text())
    assert marker["requirements"] == [f"scikit-learn=={RELEASE}"] and marker["release_of"] == "1.8.0"
    environment.require_usable(probe=True)  # its Python imports scikit-learn at that release
    assert installs.of({"hgb": RELEASE}) == installs.seconds[f"hgb@{RELEASE}"]
    again = Installs()
    assert again.ensure("hgb", RELEASE) is None and again.seconds == {f"hgb@{RELEASE}": 0.0}
