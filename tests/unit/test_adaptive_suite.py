"""The suite's `adaptive:` block: parsed, checked with one sentence naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.benchmark import resolve_plan
from tasks.errors import UserError
from tasks.evaluations.registry import all_evaluations
from tasks.specs import load_suite


def _suite(tmp_path: Path, adaptive: str, *, frameworks: str = "[constant, hgb]", folds: int = 4,
           datasets: str = "[penguins]") -> Path:
    path = tmp_path / "adaptive_case.yaml"
    path.write_text(f"datasets: {datasets}\nframeworks: {frameworks}\nfolds: {folds}\nbudget: test\n"
                    f"adaptive: {adaptive}\n")
    return path


def test_the_block_parses_with_defaults(tmp_path: Path) -> None:
    suite = load_suite(_suite(tmp_path, "{confidence: 0.9, min_folds: 2, decide: [best]}"), all_evaluations())
    assert suite.adaptive is not None
    assert (suite.adaptive.confidence, suite.adaptive.min_folds, suite.adaptive.decide) == (0.9, 2, ["best"])
    plan = resolve_plan(str(_suite(tmp_path, "{max_folds: 3}")))
    assert plan.adaptive is not None and (plan.adaptive.min_folds, plan.adaptive.max_folds) == (2, 3)
    assert plan.adaptive.decide == ["pairwise", "best"]


@pytest.mark.parametrize(("block", "fragment"), [
    ("{confidence: 0.5}", r"field 'adaptive.confidence': .*outside \(0.5, 1\)"),
    ("{confidence: 1.0}", r"field 'adaptive.confidence': .*outside \(0.5, 1\)"),
    ("{min_folds: 4, max_folds: 3}", r"field 'adaptive.min_folds': 4 is above max_folds \(3\)"),
    ("{max_folds: 5}", r"field 'adaptive.max_folds': 5 is above the suite's folds \(4\)"),
    ("{decide: [fastest]}", r"field 'adaptive.decide.0'"),
    ("{rounds: 3}", r"unknown field 'adaptive.rounds'"),
])
def test_bad_settings_name_their_field(tmp_path: Path, block: str, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        load_suite(_suite(tmp_path, block), all_evaluations())


def test_min_folds_above_a_datasets_folds_names_the_dataset(tmp_path: Path) -> None:
    path = _suite(tmp_path, "{min_folds: 6}", folds=6, datasets="[basic_motions]")  # its card: 5 folds
    with pytest.raises(UserError, match=r"min_folds': 6 is above the 5 folds of dataset basic_motions"):
        resolve_plan(str(path))


def test_one_framework_has_nothing_to_compare(tmp_path: Path) -> None:
    plan = resolve_plan(str(_suite(tmp_path, "{min_folds: 2}", frameworks="[hgb]")))
    assert plan.suite.adaptive is not None and plan.adaptive is None  # the grid runs whole
    assert plan.adaptive_note == ("adaptive_case: adaptive has nothing to compare with one framework; "
                                  "running the full grid.")
    assert resolve_plan(str(_suite(tmp_path, "{min_folds: 2}"))).adaptive_note == ""


def test_the_top_k_parses_with_its_k(tmp_path: Path) -> None:
    path = _suite(tmp_path, "{decide: [pairwise, top_k], top_k: 2}", frameworks="[constant, hgb, rf]")
    suite = load_suite(path, all_evaluations())
    assert suite.adaptive is not None
    assert (suite.adaptive.decide, suite.adaptive.top_k) == (["pairwise", "top_k"], 2)


@pytest.mark.parametrize(("block", "fragment"), [
    ("{decide: [top_k], top_k: 2}", r"field 'adaptive.top_k': 2 is outside 1 to 1 \(the suite has 2 "),
    ("{decide: [top_k], top_k: 0}", r"field 'adaptive.top_k': 0 is outside 1 to 1"),
    ("{decide: [top_k]}", r"field 'adaptive.top_k': .*`top_k` in `decide` go together"),
    ("{top_k: 1}", r"field 'adaptive.top_k': .*`top_k` in `decide` go together"),
])
def test_a_bad_top_k_names_its_field(tmp_path: Path, block: str, fragment: str) -> None:
    with pytest.raises(UserError, match=fragment):
        load_suite(_suite(tmp_path, block), all_evaluations())
