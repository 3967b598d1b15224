"""Cards, budgets and suites: loading and one-sentence errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks.errors import UserError
from tasks.specs import FrameworkRef, Suite, load_budget, read_yaml


def test_framework_variant_parses() -> None:
    ref = FrameworkRef.parse("autogluon:best_quality")
    assert (ref.name, ref.variant, ref.id) == ("autogluon", "best_quality", "autogluon:best_quality")
    assert FrameworkRef.parse({"name": "h2o", "params": {"_x": 1}}).params == {"_x": 1}


def test_framework_ref_rejects_unknown_field() -> None:
    with pytest.raises(ValidationError, match="paramz"):
        Suite(name="s", datasets=["a"], frameworks=[{"name": "constant", "paramz": {}}])


def test_malformed_yaml_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\nb: 3\n")
    with pytest.raises(UserError, match=r"bad\.yaml.*line"):
        read_yaml(bad)


def test_unknown_budget_lists_known() -> None:
    with pytest.raises(UserError, match="unknown budget 'nope'.*test"):
        load_budget("nope")
