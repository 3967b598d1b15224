"""Score over time from a real AutoGluon job: the leaderboard's models in fit order, scored by the
harness on the test fold; the curve ends at the job's own `result`."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from tasks.anytime import ANYTIME_FILE
from tasks.frameworks.registry import get_adapter
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.specs import Budget
from tasks.vocabulary import COST_METRICS, RESULT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]
# AutoGluon keeps seconds of its budget back for start and save, and on a busy machine its
# preprocessing eats much of the rest: room for three tiny models.
BUDGET = Budget(name="tiny-ag", time_s=120, cores=1, memory_mb=4096)
# Three small models and AutoGluon's weighted ensemble over them: a curve of a few points.
PARAMS = {"hyperparameters": {"GBM": [{"num_boost_round": 5}, {"num_boost_round": 40}],
                              "RF": {"n_estimators": 20}},
          "fit_weighted_ensemble": True}


def test_an_autogluon_job_carries_its_anytime_curve_ending_at_its_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = get_adapter("autogluon")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=160)["binary"]
    job = Job("anytime", spec.name, "v0", "autogluon", None, 0, 0, BUDGET, PARAMS)
    result = run_job(job, spec, tmp_path / "runs" / "ag")
    assert result.status == "ok", result.error

    curve = pd.read_csv(tmp_path / "runs" / "ag" / ANYTIME_FILE)
    assert result.info["anytime"]["offered"] and result.info["anytime"]["candidates"] >= 3
    assert len(curve) >= 2 and result.costs["anytime_points"] == len(curve)
    assert curve["elapsed_s"].is_monotonic_increasing
    assert curve["validation"].iloc[:-1].is_monotonic_increasing  # each point is a better pick by validation
    assert curve[RESULT].iloc[-1] == pytest.approx(result.scores[RESULT], abs=1e-9)
    assert curve["elapsed_s"].iloc[-1] == pytest.approx(result.costs["fit_s"])
    t95, t99 = result.costs["anytime_t95_s"], result.costs["anytime_t99_s"]
    assert 0 <= t95 <= t99 <= result.costs["fit_s"]
    assert {"anytime_t95_s", "anytime_t99_s", "anytime_points"} <= set(COST_METRICS)


def test_a_model_without_a_search_record_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=60)["binary"]
    job = Job("anytime", spec.name, "v0", "constant", None, 0, 0, Budget(name="c", time_s=5, cores=1,
                                                                          memory_mb=2000), {})
    result = run_job(job, spec, tmp_path / "runs" / "constant")
    assert result.status == "ok", result.error
    assert result.info["anytime"] == {"offered": False,
                                      "reason": "the framework exposes no record of its search's progress"}
    assert not (tmp_path / "runs" / "constant" / ANYTIME_FILE).exists()
    assert "anytime_t95_s" not in result.costs
