"""Score over time from real jobs (AutoGluon's leaderboard in fit order, FLAML's search log): each
point the framework's pick by its own validation score then, scored by the harness on the test fold;
the curve ends at the job's own `result`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import make_image_project, make_project

from tasks.anytime import ANYTIME_FILE
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.flaml_automl import KEPT, REFITTED, REFITTED_SEARCH_ROWS
from tasks.frameworks.registry import get_adapter
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import TRAINING_CURVE_FILE, JobResult
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
SMOKE = Budget(name="smoke", time_s=20, cores=1, memory_mb=4096)  # as specs/budgets.yaml has it


def _check_curve(result: JobResult, job_dir: Path) -> pd.DataFrame:
    assert result.status == "ok", result.error
    curve = pd.read_csv(job_dir / ANYTIME_FILE)
    assert result.info["anytime"]["offered"], result.info["anytime"]
    assert len(curve) >= 2 and result.costs["anytime_points"] == len(curve)
    assert curve["elapsed_s"].is_monotonic_increasing
    assert curve["validation"].iloc[:-1].is_monotonic_increasing  # each point is a better pick by validation
    assert curve[RESULT].iloc[-1] == pytest.approx(result.scores[RESULT], abs=1e-9)
    assert curve["elapsed_s"].iloc[-1] == pytest.approx(result.costs["fit_s"])
    assert 0 <= result.costs["anytime_t95_s"] <= result.costs["anytime_t99_s"] <= result.costs["fit_s"]
    return curve


def test_an_autogluon_job_carries_its_anytime_curve_ending_at_its_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = get_adapter("autogluon")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=160)["binary"]
    job = Job("anytime", spec.name, "v0", "autogluon", None, 0, 0, BUDGET, PARAMS)
    result = run_job(job, spec, tmp_path / "runs" / "ag")
    _check_curve(result, tmp_path / "runs" / "ag")
    assert result.info["anytime"]["candidates"] >= 3
    assert {"anytime_t95_s", "anytime_t99_s", "anytime_points"} <= set(COST_METRICS)


@pytest.mark.parametrize("problem_type", ["binary", "regression"])
def test_a_flaml_job_carries_its_search_log_as_a_curve_ending_at_its_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, problem_type: str) -> None:
    adapter = get_adapter("flaml")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=200)[problem_type]
    # The smoke budget; one learner and a few trials, so the log holds a few improvements.
    job = Job("anytime", spec.name, "v0", "flaml", None, 0, 0, SMOKE,
              {"estimator_list": ["lgbm", "rf"], "max_iter": 12})
    result = run_job(job, spec, tmp_path / "runs" / "flaml")
    curve = _check_curve(result, tmp_path / "runs" / "flaml")
    assert result.info["anytime"]["candidates"] >= 3
    # Every earlier point's model was refitted from FLAML's log (it keeps none without
    # model_history); the last is the job's own model.
    assert set(curve["source"].iloc[:-1]) == {REFITTED}
    assert curve["model"].iloc[-1].endswith("(returned)")


def _tiny_binary() -> tuple[pd.DataFrame, pd.Series, TaskInfo]:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x1": rng.normal(size=300), "x2": rng.normal(size=300)})
    y = pd.Series(np.where(X["x1"] + 0.5 * rng.normal(size=300) > 0, "yes", "no"), dtype=object, name="label")
    return X, y, TaskInfo(problem_type="binary", target="label", metric="auc", classes=("no", "yes"))


def test_a_flaml_refit_of_its_best_logged_trial_is_the_model_it_returned(tmp_path: Path) -> None:
    """retrain_from_log on the last improvement's record gives the very model FLAML returned (it
    retrains its pick on every row the same way), so every point is what FLAML would have returned
    had it stopped there."""
    adapter = get_adapter("flaml")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    X, y, task = _tiny_binary()
    model = adapter.fit(X, y, task=task, budget=SMOKE, params={"estimator_list": ["lgbm"], "max_iter": 8},
                        workdir=tmp_path, seed=0)
    candidates = model.anytime_candidates()
    final = next(c for c in candidates if c.final)
    logged = [c for c in candidates if not c.final]
    best = max(logged, key=lambda c: c.validation)
    assert len(logged) >= 2 and best.validation == pytest.approx(final.validation)
    assert {c.source for c in logged} == {REFITTED}
    np.testing.assert_allclose(best.predict_proba(X).to_numpy(), final.predict_proba(X).to_numpy())
    assert list(best.predict(X)) == list(final.predict(X))
    assert all(c.ready_s <= final.ready_s for c in logged)


def test_without_retrain_full_flaml_s_kept_models_serve_and_the_rest_are_the_search_s(tmp_path: Path) -> None:
    """retrain_full off: FLAML returns the search's own model. With model_history it keeps each
    learner's best (used as it is); the others are refitted on the search's rows, which for
    LightGBM is the trial's model again: the last improvement's refit is the returned model."""
    adapter = get_adapter("flaml")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    X, y, task = _tiny_binary()
    model = adapter.fit(X, y, task=task, budget=SMOKE,
                        params={"estimator_list": ["rf", "extra_tree", "lgbm"], "max_iter": 25,
                                "retrain_full": False, "model_history": True},
                        workdir=tmp_path, seed=0)
    candidates = model.anytime_candidates()
    final = next(c for c in candidates if c.final)
    logged = [c for c in candidates if not c.final]
    assert {c.source for c in logged} <= {KEPT, REFITTED_SEARCH_ROWS}
    assert any(c.source == KEPT for c in logged)  # rf's best, overtaken by lgbm, is kept by FLAML
    best = max(logged, key=lambda c: c.validation)
    assert best.source == REFITTED_SEARCH_ROWS  # the best learner's kept model is the returned one
    np.testing.assert_allclose(best.predict_proba(X).to_numpy(), final.predict_proba(X).to_numpy())
    for candidate in logged:
        assert len(candidate.predict(X.head(5))) == 5


def test_an_h2o_job_carries_its_leaderboard_as_a_curve_ending_at_its_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each leaderboard model is a model in H2O's cluster, ready when the event log added it."""
    adapter = get_adapter("h2o")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=160)["binary"]
    # Two quick forests (DRF, then XRT; a GLM's lambda search took 9 to 25 s here) within
    # max_runtime_secs on a busy machine.
    budget = Budget(name="h2o", time_s=45, cores=1, memory_mb=4096)
    params = {"max_models": 2, "include_algos": ["DRF"], "nfolds": 2}
    job = Job("anytime", spec.name, "v0", "h2o", None, 0, 0, budget, params)
    result = run_job(job, spec, tmp_path / "runs" / "h2o")
    curve = _check_curve(result, tmp_path / "runs" / "h2o")
    board = result.info["leaderboard_costs"]
    assert result.info["anytime"]["candidates"] == len(board) >= 2
    assert all(row["training_time_ms"] >= 0 and row["predict_time_per_row_ms"] >= 0 for row in board)
    assert curve["model"].iloc[-1] == result.info["leader"]


def test_a_cnn_job_carries_its_improving_epochs_as_a_curve_ending_at_its_result(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CNN on tiny generated digit-like images: each epoch that improved the validation loss is a
    point, its weights (written during the fit) scored by the harness on the test fold."""
    adapter = get_adapter("cnn")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_image_project(tmp_path / "project", rows=48)["multiclass"]
    params = {"batch_size": 8, "epochs": 4, "_validation_rows": 8}
    job = Job("anytime", spec.name, "v0", "cnn", None, 0, 0, Budget(name="cnn", time_s=60, cores=1,
                                                                     memory_mb=4096), params)
    result = run_job(job, spec, tmp_path / "runs" / "cnn")
    curve = _check_curve(result, tmp_path / "runs" / "cnn")
    per_epoch = pd.read_csv(tmp_path / "runs" / "cnn" / TRAINING_CURVE_FILE)
    epochs = dict(zip(per_epoch["step"], per_epoch["validation_loss"], strict=True))
    improving = [step for step, loss in epochs.items() if loss < min([math.inf] + [
        epochs[earlier] for earlier in epochs if earlier < step])]
    assert result.info["anytime"]["candidates"] == len(improving) + 1  # and the returned model
    assert list(curve["model"].iloc[:-1]) == [f"epoch {step}" for step in improving]
    np.testing.assert_allclose(-curve["validation"].iloc[:-1], [epochs[step] for step in improving],
                               atol=1e-5)
    assert curve["model"].iloc[-1] == f"epoch {improving[-1]} (returned)"
    assert not (tmp_path / "runs" / "cnn" / "work").exists()  # the checkpoints went with the work folder


def test_hf_finetune_s_improving_evaluations_are_candidates_and_the_best_is_the_returned_model(
        tmp_path: Path) -> None:
    adapter = get_adapter("hf_finetune")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    texts = ["great taste, love it", "best snack ever", "delicious and fresh", "stale and awful",
             "tasted like cardboard", "too salty, threw it away"] * 4
    X = pd.DataFrame({"review": texts})
    y = pd.Series((["great"] * 3 + ["other"] * 3) * 4, dtype=object)
    task = TaskInfo("binary", "score", "auc", {"review": "text"}, ("great", "other"))
    params = {**adapter.test_params(), "_max_steps": 3, "_validation_rows": 4, "_evaluations_per_epoch": 8}
    model = adapter.fit(X, y, task=task, budget=Budget(name="hf", time_s=120, cores=1, memory_mb=2048),
                        params=params, workdir=tmp_path, seed=0)
    candidates = model.anytime_candidates()
    final = candidates[-1]
    checkpoints = candidates[:-1]
    assert final.final and len(checkpoints) >= 1 and not any(c.final for c in checkpoints)
    losses = [-c.validation for c in checkpoints]
    assert losses == sorted(losses, reverse=True)  # each one an improvement
    assert [c.name for c in checkpoints][-1] == f"step {model.info()['best_step']}"
    # The last checkpoint holds the best weights, which the returned model restored.
    np.testing.assert_allclose(checkpoints[-1].predict_proba(X).to_numpy(), final.predict_proba(X).to_numpy(),
                               atol=1e-5)
    if len(checkpoints) > 1:  # an earlier one answers with its own weights
        assert not np.allclose(checkpoints[0].predict_proba(X).to_numpy(), final.predict_proba(X).to_numpy())


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
