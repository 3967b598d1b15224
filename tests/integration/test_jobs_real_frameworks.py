"""Real AutoML systems through the whole job path: child process, watchdog, harness scores.

AutoGluon, H2O and FLAML each run one job on a tiny dataset with their tiny test settings; the
result must be scored by the harness with the one vocabulary, and the saved model folder must
load again and reproduce the predictions the job recorded.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import make_project

from tasks.frameworks.registry import get_adapter, load_saved_model
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.results import MODEL_DIR, PREDICTIONS_FILE, JobResult
from tasks.specs import Budget
from tasks.vocabulary import COST_METRICS, RESULT, SCORE_METRICS

pytestmark = pytest.mark.integration
# Each framework's test_params bound the work (one small model); the time is a ceiling a loaded
# machine never reaches. At 30 s AutoGluon, which keeps ~8 s back for its start and save, trained
# nothing when three test workers shared two cores with a cluster test.
BUDGET = Budget(name="tiny", time_s=300, cores=1, memory_mb=4096)
BUDGETS = {"autogluon": Budget(name="tiny-ag", time_s=300, cores=1, memory_mb=4096)}


@pytest.mark.parametrize(
    ("framework", "problem_type"),
    [("autogluon", "binary"), ("h2o", "regression"), ("flaml", "multiclass")],
)
def test_real_framework_job_is_scored_and_its_model_reloads(
    framework: str, problem_type: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = get_adapter(framework)
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=120)[problem_type]
    budget = BUDGETS.get(framework, BUDGET)
    job = Job("integration", spec.name, "v0", framework, None, 0, 0, budget, adapter.test_params())
    job_dir = tmp_path / "runs" / framework

    result = run_job(job, spec, job_dir)

    assert result.status == "ok", result.error
    assert result == JobResult.load(job_dir)
    # The tiny multiclass data has 3 classes: no top-5 accuracy (scored with more than 5).
    assert set(result.scores) == {*SCORE_METRICS[problem_type], RESULT} - {"top5_acc"}
    assert all(np.isfinite(v) for v in result.scores.values())
    assert set(result.costs) <= set(COST_METRICS)
    assert result.costs["models_count"] >= 1 and result.costs["peak_rss_mb"] > 0
    assert result.framework_version == adapter.version()
    assert result.info["startup_s"] >= 0

    recorded = pd.read_csv(job_dir / PREDICTIONS_FILE)
    assert len(recorded) == result.costs["test_rows"]
    frame = pd.read_csv(spec.path)
    X_test = frame.iloc[recorded["row"].to_numpy()].drop(columns=["label"]).reset_index(drop=True)
    X_test["color"] = X_test["color"].astype("category")
    model, task = load_saved_model(job_dir / MODEL_DIR)
    try:
        again = np.asarray(model.predict(X_test))
    finally:
        adapter.stop()
    if task.is_classification:
        assert list(map(str, again)) == list(map(str, recorded["prediction"]))
    else:
        np.testing.assert_allclose(again.astype(float), recorded["prediction"].to_numpy(), rtol=1e-6)


def test_autogluon_builds_its_own_text_features_from_raw_strings(tmp_path: Path) -> None:
    from tasks.frameworks.base import TaskInfo

    adapter = get_adapter("autogluon")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    good = ["great taste, love it", "best snack ever", "delicious and fresh", "excellent rich coffee"]
    bad = ["stale and awful", "tasted like cardboard", "broken package, bad smell", "too salty, threw it"]
    # Each word in >= 30 rows: AutoGluon keeps n-grams seen that often.
    texts = [f"{text} batch {i}" for i in range(40) for text in good + bad]
    X = pd.DataFrame({"review": texts, "stars": np.arange(len(texts)) % 5})
    y = pd.Series((["great"] * 4 + ["other"] * 4) * 40)
    task = TaskInfo("binary", "score", "auc", {"review": "text", "stars": "numeric"}, ("great", "other"))

    params = adapter.test_params()
    model = adapter.fit(X, y, task=task, budget=BUDGETS["autogluon"], params=params, workdir=tmp_path, seed=0)

    assert model.predictor.feature_metadata_in.get_features(required_special_types=["text"]) == ["review"]
    assert any(name.startswith("__nlp__.") for name in model.predictor.feature_metadata.get_features())
    fresh = pd.DataFrame({"review": ["love it, delicious", None], "stars": [4, 1]})
    model.save(tmp_path / "model")
    again = adapter.load(tmp_path / "model", task)
    expected = model.predict_proba(fresh).to_numpy()
    np.testing.assert_array_equal(again.predict_proba(fresh).to_numpy(), expected)


def test_a_fold_larger_than_autogluons_cap_is_fitted_on_a_sample_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = get_adapter("autogluon")
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=120)["binary"]
    params = {**adapter.test_params(), "_max_train_rows": 50}
    job = Job("integration", spec.name, "v0", "autogluon", None, 0, 0, BUDGETS["autogluon"], params)

    result = run_job(job, spec, tmp_path / "runs" / "autogluon")

    assert result.status == "ok", result.error
    assert result.costs["train_rows"] > 50
    assert abs(result.costs["fit_rows"] - 50) <= 1  # each class keeps its share, rounded
    assert f"of the {result.costs['train_rows']:,.0f} training rows" in result.info["sampled"]
    # Scored on the whole test part, as every other framework.
    assert len(pd.read_csv(tmp_path / "runs" / "autogluon" / PREDICTIONS_FILE)) == result.costs["test_rows"]


def test_hgb_records_how_many_rounds_it_boosted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=120)["multiclass"]
    job = Job("integration", spec.name, "v0", "hgb", None, 0, 0, BUDGET, {"max_iter": 7})

    result = run_job(job, spec, tmp_path / "runs" / "hgb")

    assert result.status == "ok", result.error
    assert result.costs["fit_rows"] == result.costs["train_rows"]
    # 120 rows: below 10 000 HGB has no early-stopping check, so it boosts every round.
    assert result.info["boosting_rounds"] == 7 and result.info["stopped_by_time"] is False
