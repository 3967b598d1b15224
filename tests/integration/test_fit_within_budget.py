"""Frameworks given more rows than their budget holds: a recorded sample (capped by the suite's
`_max_train_rows`, or by the budget itself), or one sentence saying no model was trained, never a
traceback from an empty prediction; H2O's heap follows the budget."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from tasks.frameworks.registry import get_adapter
from tasks.frameworks.rf import CELLS_PER_CORE_MINUTE, PREDICT_ROWS_PER_CORE_MINUTE
from tasks.jobs import grace_s, run_job
from tasks.plan import Job
from tasks.results import PREDICTIONS_FILE
from tasks.specs import Budget

pytestmark = pytest.mark.integration
BUDGET = Budget(name="tiny", time_s=15, cores=1, memory_mb=4096)


def _available(framework: str) -> None:
    reason = get_adapter(framework).unavailable_reason()
    if reason:
        pytest.skip(reason)


def test_flaml_that_trains_nothing_within_its_budget_fails_with_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available("flaml")
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=120)["binary"]
    # A time budget shorter than FLAML's first trial: it returns without an estimator.
    params = {"estimator_list": ["lgbm"], "time_budget": 0.001}
    job = Job("integration", spec.name, "v0", "flaml", None, 0, 0, BUDGET, params)

    result = run_job(job, spec, tmp_path / "runs" / "flaml")

    assert result.status == "failed"
    assert result.error == ("flaml trained no model within 15 s on 60 rows; raise the budget's time or set "
                            "`_max_train_rows`")


def test_flaml_above_its_row_cap_is_fitted_on_a_sample_and_scored_on_the_whole_test_part(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available("flaml")
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=160)["binary"]
    params = {**get_adapter("flaml").test_params(), "_max_train_rows": 50}
    job = Job("integration", spec.name, "v0", "flaml", None, 0, 0, BUDGET, params)
    job_dir = tmp_path / "runs" / "flaml"

    result = run_job(job, spec, job_dir)

    assert result.status == "ok", result.error
    assert result.costs["train_rows"] == 80
    assert abs(result.costs["fit_rows"] - 50) <= 1  # each class keeps its share, rounded
    assert "of the 80 training rows, as the suite's _max_train_rows sets" in result.info["sampled"]
    assert result.info["sampled"].endswith("scored on the whole test part")
    assert len(pd.read_csv(job_dir / PREDICTIONS_FILE)) == result.costs["test_rows"] == 80


def test_rfs_own_budget_caps_its_rows_without_a_suite_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _available("rf")
    # rf: the cheapest framework with a row cap. No `_max_train_rows`: one core and one second of
    # time_s, less the time predicting fold 0's 4,000 test rows takes (twice: labels, then
    # probabilities, at 950,000 rows per core-minute), hold about 6,200 cells, i.e. about 1,550 rows of
    # the tiny project's 4 feature columns, fewer than the 4,000 training rows of fold 0.
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=8000)["binary"]
    budget = Budget(name="tiny-rf", time_s=1, cores=1, memory_mb=2000)
    job = Job("integration", spec.name, "v0", "rf", None, 0, 0, budget, get_adapter("rf").test_params())
    job_dir = tmp_path / "runs" / "rf"
    feature_columns = 4  # x1, x2, color, note
    test_rows = 4000
    fit_minutes = budget.time_s / 60 - 2 * test_rows / (PREDICT_ROWS_PER_CORE_MINUTE * budget.cores)
    cap = int(CELLS_PER_CORE_MINUTE * budget.cores * fit_minutes / feature_columns)

    result = run_job(job, spec, job_dir)

    assert result.status == "ok", result.error
    assert "_max_train_rows" not in result.info["params"]  # the budget alone set the cap
    assert result.costs["train_rows"] == 4000
    fit_rows = result.costs["fit_rows"]
    assert fit_rows < result.costs["train_rows"]
    assert abs(fit_rows - cap) <= 1  # each class keeps its share, rounded
    assert result.info["sampled"] == (
        f"fitted on a random sample of {int(fit_rows):,} of the 4,000 training rows, the most the budget "
        "allows (suite param _max_train_rows); scored on the whole test part")
    assert len(pd.read_csv(job_dir / PREDICTIONS_FILE)) == result.costs["test_rows"] == 4000
    # The harness's own rule for every job: the fit ends within time_s and its grace.
    assert result.costs["fit_s"] <= budget.time_s + grace_s(job, get_adapter("rf"))


def test_h2os_heap_follows_the_budgets_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.frameworks.h2o_automl import HEAP_SHARE

    _available("h2o")
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=120)["regression"]
    budget = Budget(name="tiny-h2o", time_s=15, cores=1, memory_mb=2000)
    job = Job("integration", spec.name, "v0", "h2o", None, 0, 0, budget, get_adapter("h2o").test_params())

    result = run_job(job, spec, tmp_path / "runs" / "h2o")

    assert result.status == "ok", result.error
    asked = 2000 * HEAP_SHARE
    # The cluster's own report (Runtime.maxMemory: the heap less a survivor space).
    assert 0.85 * asked <= result.info["jvm_max_mem_mb"] <= asked


def test_a_large_frame_reaches_h2o_through_parquet_typed_as_an_upload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from tasks.frameworks import h2o_automl
    from tasks.frameworks._tabular import FeatureSchema
    from tasks.frameworks.base import TaskInfo

    _available("h2o")
    rng = np.random.default_rng(0)
    rows = 300
    X = pd.DataFrame({"x": rng.normal(size=rows), "n": rng.integers(0, 5, size=rows),
                      "color": pd.Categorical(rng.choice(["red", "blue", None], size=rows)),
                      "level": rng.choice([1, 2, 3], size=rows)})
    X.loc[::7, "x"] = np.nan
    y = pd.Series(rng.choice(["yes", "no"], size=rows), name="label", dtype=object)
    task = TaskInfo("binary", "label", "auc",
                    {"x": "numeric", "n": "numeric", "color": "categorical", "level": "categorical"},
                    ("no", "yes"))
    schema = FeatureSchema.learn(X, task)
    adapter = get_adapter("h2o")
    adapter.start(Budget(name="tiny", time_s=15, cores=1, memory_mb=2000), tmp_path)
    try:
        uploaded = h2o_automl._to_h2o(X, schema, y)
        monkeypatch.setattr(h2o_automl, "IMPORT_ROWS", 10)
        monkeypatch.setattr(h2o_automl, "PARQUET_SLICE_ROWS", 70)  # several slices, the last one short
        imported = h2o_automl._to_h2o(X, schema, y)
        assert imported.types == uploaded.types
        assert imported.levels() == uploaded.levels()
        pd.testing.assert_frame_equal(h2o_automl._as_pandas(imported), h2o_automl._as_pandas(uploaded))
    finally:
        adapter.stop()
