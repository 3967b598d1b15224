"""The flow's side of the nightly: artifact keys Prefect accepts, and a Failed state on regression."""

from __future__ import annotations

import re

import pandas as pd

from tasks.report.compare import TABLE_COLUMNS, Comparison
from tasks.report.compare_store import NightlyComparison
from tasks.report.publish import artifact_key, regression_state


def _nightly(regression: bool) -> NightlyComparison:
    row = dict.fromkeys(TABLE_COLUMNS, "")
    row.update({"change": -0.05, "change_pct": -6.0, "z": -9.0, "regression": regression})
    return NightlyComparison("cand", "base", Comparison(pd.DataFrame([row], columns=TABLE_COLUMNS)), "# diag")


def test_artifact_keys_are_lowercase_letters_digits_and_dashes() -> None:
    key = artifact_key("regression", "My_Suite v2")
    assert key == "regression-my-suite-v2"
    assert re.fullmatch(r"[a-z0-9-]+", key)


def test_a_regression_fails_the_flow_run_and_a_clean_night_does_not() -> None:
    state = regression_state(_nightly(True))
    assert state is not None and state.is_failed() and "base" in state.message
    assert regression_state(_nightly(False)) is None
    assert regression_state(NightlyComparison("cand", None, None, "no baseline")) is None


def test_each_regressed_cell_links_its_job_runs_on_both_sides() -> None:
    from tasks.report.publish import regression_run_links

    regressions = pd.DataFrame({"dataset": ["iris", "iris"], "framework": ["hgb", "hgb"],
                                "metric": ["result", "fit_s"]})

    def runs(prefix: str) -> pd.DataFrame:
        return pd.DataFrame({"dataset": ["iris", "iris", "iris"], "framework": ["hgb", "hgb", "rf"],
                             "fold": [1, 0, 0], "seed": [0, 0, 0], "experiment_id": ["7"] * 3,
                             "run_id": [f"{prefix}1", f"{prefix}0", f"{prefix}rf"]})

    lines = regression_run_links(regressions, {"current": runs("c"), "baseline": runs("b")},
                                 lambda experiment, run: f"http://mlflow/#/experiments/{experiment}/runs/{run}")
    cell = [line for line in lines if line.startswith("- ")]
    assert cell == ["- **iris / hgb**: [current f0 s0](http://mlflow/#/experiments/7/runs/c0), "
                    "[current f1 s0](http://mlflow/#/experiments/7/runs/c1), "
                    "[baseline f0 s0](http://mlflow/#/experiments/7/runs/b0), "
                    "[baseline f1 s0](http://mlflow/#/experiments/7/runs/b1)"]
    assert regression_run_links(regressions.iloc[0:0], {"current": runs("c")}, str) == []
