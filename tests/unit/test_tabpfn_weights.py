"""TabPFN's weights are never fetched: without the checkpoint where AUTOML_EVAL_TABPFN_WEIGHTS points,
or with a file whose sha256 is not the declared one, a job is refused in one sentence naming the file
and the variable, before anything of TabPFN's is imported. Fast: no TabPFN, no torch needed."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from tasks.frameworks.base import JobFailure, TaskInfo
from tasks.frameworks.tabpfn import (
    ADAPTER,
    CLASSIFIER_WEIGHTS,
    HASHES_FILE,
    REGRESSOR_WEIGHTS,
    WEIGHTS_ENV,
    find_weights,
)
from tasks.specs import Budget


def _one_sentence(text: str | None) -> str:
    assert text and "\n" not in text and text.rstrip().endswith(".") and text.count(". ") == 0, text
    return text


@pytest.fixture
def specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    return make_project(tmp_path / "project", rows=40)


def test_without_the_variable_each_dataset_is_refused_naming_its_file_and_the_variable(
    specs, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    for problem_type, spec in specs.items():
        reason = _one_sentence(ADAPTER.applies_to(spec))
        expected = REGRESSOR_WEIGHTS if problem_type == "regression" else CLASSIFIER_WEIGHTS
        assert expected in reason and WEIGHTS_ENV in reason and "unset" in reason
    # The registry's listing says the same (the environment's own check never downloads).
    assert ADAPTER.unavailable_reason()


def test_a_missing_file_an_undeclared_hash_and_a_wrong_file_are_each_refused(
    specs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
) -> None:
    folder = tmp_path / "weights"
    folder.mkdir()
    monkeypatch.setenv(WEIGHTS_ENV, str(folder))
    binary = specs["binary"]

    missing = _one_sentence(ADAPTER.applies_to(binary))
    assert str(folder / CLASSIFIER_WEIGHTS) in missing and WEIGHTS_ENV in missing

    checkpoint = folder / CLASSIFIER_WEIGHTS
    checkpoint.write_bytes(b"not the published checkpoint")
    undeclared = _one_sentence(ADAPTER.applies_to(binary))
    assert "no declared sha256" in undeclared and HASHES_FILE in undeclared

    (folder / HASHES_FILE).write_text(f"{'0' * 64}  {CLASSIFIER_WEIGHTS}\n")
    wrong = _one_sentence(ADAPTER.applies_to(binary))
    actual = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    assert actual in wrong and "0" * 64 in wrong and str(checkpoint) in wrong

    # The declared hash of the file in place: the classifier passes the check, the regressor, whose
    # file is absent, is still refused by name.
    (folder / HASHES_FILE).write_text(f"{actual} *{CLASSIFIER_WEIGHTS}\n")
    assert ADAPTER.applies_to(binary) is None
    assert find_weights("multiclass").sha256 == actual
    assert REGRESSOR_WEIGHTS in _one_sentence(ADAPTER.applies_to(specs["regression"]))


def test_fit_refuses_before_importing_tabpfn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WEIGHTS_ENV, raising=False)
    task = TaskInfo("binary", "label", "auc", {}, ("no", "yes"))
    X = pd.DataFrame({"x": [0.0, 1.0, 2.0, 3.0]})
    y = pd.Series(["no", "yes", "no", "yes"])
    budget = Budget(name="tiny", time_s=20, cores=1, memory_mb=1024)
    with pytest.raises(JobFailure, match=f"{CLASSIFIER_WEIGHTS}.*{WEIGHTS_ENV}"):
        ADAPTER.fit(X, y, task=task, budget=budget, params={}, workdir=tmp_path, seed=0)
