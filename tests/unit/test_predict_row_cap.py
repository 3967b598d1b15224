"""The row cap leaves the time predicting the test part takes (rf at 10 M rows was killed predicting).

A real job, child process and watchdog, with a test adapter whose fit and predict take time in
proportion to the rows (tests/jobs_support/slow_predict_adapter.py): without the test part in the
cap, the fit takes the budget's whole time and predicting runs past the hard limit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support import slow_predict_adapter
from jobs_support.tiny_project import make_project

from tasks.frameworks._sampling import MIN_FIT_SHARE
from tasks.frameworks.registry import EXTRA_ADAPTERS_ENV
from tasks.frameworks.rf import ROW_CAP as RF_ROW_CAP
from tasks.jobs import run_job
from tasks.launch import LAUNCHER_ENV
from tasks.plan import Job
from tasks.specs import Budget
from tasks.task_info import TaskInfo

BUDGET = Budget(name="slow-predict", time_s=2, cores=1, memory_mb=2048)
# 2 folds of 800 rows: 800 test rows take 2 x 0.8 s to predict (labels, then probabilities), and at
# 200 rows a second the fit alone would fill the 2 s (400 of the 800 training rows), and fit and
# predicting 3.6 s. The worker's own start took up to 3 s here on a busy machine: the grace leaves it
# room, and the assertions below hold the fit and predicting to time_s.
ROWS = 1_600
GRACE_S = 6.0


def test_a_job_whose_predicting_would_overrun_is_fitted_on_fewer_rows_and_ends_ok(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    monkeypatch.setenv(EXTRA_ADAPTERS_ENV, slow_predict_adapter.__file__)
    monkeypatch.setenv(LAUNCHER_ENV, "warm")
    spec = make_project(tmp_path / "project", rows=ROWS)["binary"]
    job = Job("slow", spec.name, "v0", "slowpredict", None, 0, 0, BUDGET, {})

    result = run_job(job, spec, tmp_path / "job", grace_seconds=GRACE_S)

    assert result.status == "ok", (result.error, result.info.get("timeline_s"))
    # Predicting 800 rows twice takes 1.6 of the 2 s: the fit gets the 0.4 s left, 80 rows.
    assert result.costs["fit_rows"] == pytest.approx(80, abs=2)
    fit_and_predicting = result.costs["fit_s"] + result.costs["predict_s"] + result.info["predict_proba_s"]
    assert fit_and_predicting < BUDGET.time_s + 0.5
    assert "fitted on a random sample of" in result.info["sampled"]


def test_rf_at_ten_million_rows_leaves_its_minute_to_predicting_a_million_test_rows() -> None:
    budget = Budget(name="1m2c", time_s=60, cores=2, memory_mb=8192, gpus=0)
    X = pd.DataFrame(np.zeros((200_000, 17)), columns=[f"c{i}" for i in range(17)])
    task = TaskInfo("binary", "y", "auc", classes=("a", "b"), predict_rows=1_000_000)
    fit_only = RF_ROW_CAP.rows(X, budget)
    with_predicting = RF_ROW_CAP.rows(X, budget, task=task)
    assert fit_only is not None and with_predicting is not None
    # Two passes over 1 M rows at 950,000 rows per core-minute on 2 cores: more than the minute, so
    # the fit keeps its floor, MIN_FIT_SHARE of the minute.
    assert with_predicting == pytest.approx(MIN_FIT_SHARE * fit_only, rel=0.01)
    regression = TaskInfo("regression", "y", "rmse", predict_rows=100_000)  # one pass, 3.2 s of 60
    assert RF_ROW_CAP.rows(X, budget, task=regression) == pytest.approx(fit_only * (60 - 3.16) / 60, rel=0.01)
