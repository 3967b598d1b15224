"""Text adapters on tiny data: raw strings in, labels and probabilities out, exact save/load."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.errors import UserError
from tasks.frameworks import hf_finetune
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.registry import get_adapter
from tasks.results import CURVE_INFO_KEY
from tasks.specs import Budget

POSITIVE = [
    "great taste, love it",
    "best snack ever, would buy again",
    "delicious and fresh",
    "my kids love these",
    "excellent coffee, rich flavour",
    "perfect, fast delivery",
]
NEGATIVE = [
    "stale and awful",
    "never again, tasted like cardboard",
    "broken package, bad smell",
    "too salty, threw it away",
    "disappointing and overpriced",
    "worst tea I ever had",
]
TASK = TaskInfo("binary", "score", "auc", {"review": "text"}, ("great", "other"))
BUDGET = Budget(name="tiny", time_s=120, cores=1, memory_mb=2048)


def reviews(repeat: int = 2) -> tuple[pd.DataFrame, pd.Series]:
    texts = (POSITIVE + NEGATIVE) * repeat
    labels = (["great"] * len(POSITIVE) + ["other"] * len(NEGATIVE)) * repeat
    return pd.DataFrame({"review": texts}), pd.Series(labels, dtype=object)


def test_tfidf_logreg_learns_from_raw_strings_and_round_trips(tmp_path: Path) -> None:
    adapter = get_adapter("tfidf_logreg")
    X, y = reviews(repeat=3)
    model = adapter.fit(
        X, y, task=TASK, budget=BUDGET, params=adapter.test_params(), workdir=tmp_path, seed=0
    )
    fresh = pd.DataFrame({"review": ["love it, great", "awful and stale", None]})

    assert list(model.predict(fresh)[:2]) == ["great", "other"]
    model.save(tmp_path / "model")
    again = adapter.load(tmp_path / "model", TASK)
    assert list(again.predict_proba(fresh).columns) == ["great", "other"]
    np.testing.assert_array_equal(
        again.predict_proba(fresh).to_numpy(), model.predict_proba(fresh).to_numpy()
    )


def test_tfidf_logreg_without_a_text_column_says_so(tmp_path: Path) -> None:
    task = TaskInfo("binary", "y", "auc", {"x": "numeric"}, ("a", "b"))
    with pytest.raises(ValueError, match="role 'text'"):
        get_adapter("tfidf_logreg").fit(
            pd.DataFrame({"x": [1.0, 2.0, 3.0, 4.0]}),
            pd.Series(list("abab")),
            task=task,
            budget=BUDGET,
            params={},
            workdir=tmp_path,
            seed=0,
        )


def test_text_adapters_declare_text_only() -> None:
    for name in ("tfidf_logreg", "hf_finetune"):
        assert get_adapter(name).modalities == frozenset({"text"})


def test_hf_finetune_trains_saves_and_reloads_exactly(tmp_path: Path) -> None:
    adapter = get_adapter("hf_finetune")
    X, y = reviews()
    model = adapter.fit(
        X, y, task=TASK, budget=BUDGET, params=adapter.test_params(), workdir=tmp_path, seed=0
    )
    info = model.info()
    assert info["steps"] == 2 and info["stopped_by"] == "max_steps"
    assert info["device"] == "cpu" and info["amp"] is False
    assert info["validation_rows"] > 0 and info["best_step"] in (1, 2)
    assert Path(info["checkpoint"]) == hf_finetune.default_checkpoint()
    # Its validation curve, one row per evaluation, which the harness saves as training_curve.csv.
    curve = info[CURVE_INFO_KEY]
    steps = [row["step"] for row in curve]
    assert len(curve) == info["evaluations"] and steps == sorted(set(steps)) and steps[-1] == info["steps"]
    assert all(row["validation_loss"] > 0 for row in curve)

    raw = pd.DataFrame({"review": ["I love this snack", "stale, never again"]})
    proba = model.predict_proba(raw)
    assert list(proba.columns) == ["great", "other"]
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-5)
    model.save(tmp_path / "model")
    again = adapter.load(tmp_path / "model", TASK)
    np.testing.assert_allclose(again.predict_proba(raw).to_numpy(), proba.to_numpy(), rtol=1e-5, atol=1e-6)
    assert list(again.predict(raw)) == list(model.predict(raw))


def test_hf_finetune_stops_when_the_budget_runs_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A clock that advances one second each time it is read: the budget, not the epochs, ends training.
    ticks = iter(range(10**6))
    monkeypatch.setattr(hf_finetune.time, "monotonic", lambda: float(next(ticks)))
    adapter = get_adapter("hf_finetune")
    X, y = reviews()
    budget = Budget(name="short", time_s=12, cores=1, memory_mb=2048)
    params = {"max_length": 16, "batch_size": 4, "epochs": 50, "_validation_rows": 4}
    model = adapter.fit(X, y, task=TASK, budget=budget, params=params, workdir=tmp_path, seed=0)

    info = model.info()
    assert info["stopped_by"] == "budget"
    assert 0 < info["steps"] < 50 * 5
    assert info["evaluations"] >= 1 and 1 <= info["best_step"] <= info["steps"]


def test_hf_finetune_regression_predicts_numbers(tmp_path: Path) -> None:
    adapter = get_adapter("hf_finetune")
    X, _ = reviews()
    y = pd.Series(np.linspace(1.0, 5.0, len(X)))
    task = TaskInfo("regression", "stars", "rmse", {"review": "text"})
    model = adapter.fit(
        X, y, task=task, budget=BUDGET, params=adapter.test_params(), workdir=tmp_path, seed=0
    )
    predictions = model.predict(X.head(3))
    assert predictions.shape == (3,) and np.isfinite(predictions).all()


def test_a_checkpoint_that_cannot_load_offline_is_one_sentence(tmp_path: Path) -> None:
    adapter = get_adapter("hf_finetune")
    X, y = reviews()
    for checkpoint, why in (
        ("no-such-org/no-such-model", "local Hugging Face cache"),
        (str(tmp_path), "folder"),
    ):
        with pytest.raises(UserError, match=why) as caught:
            adapter.fit(
                X, y, task=TASK, budget=BUDGET, params={"checkpoint": checkpoint}, workdir=tmp_path, seed=0
            )
        assert "\n" not in str(caught.value) and str(caught.value).count(". ") == 0


def test_unknown_params_are_named(tmp_path: Path) -> None:
    X, y = reviews()
    with pytest.raises(ValueError, match="_no_such_setting"):
        get_adapter("hf_finetune").fit(
            X, y, task=TASK, budget=BUDGET, params={"_no_such_setting": 1}, workdir=tmp_path, seed=0
        )


def test_constant_and_autogluon_take_text_and_tabular_learners_skip_it_with_the_reason(
    tmp_path: Path, built_catalog: Path
) -> None:
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import load_dataset_spec

    X, y = reviews()
    model = get_adapter("constant").fit(X, y, task=TASK, budget=BUDGET, params={}, workdir=tmp_path, seed=0)
    assert model.predict_proba(X.head(1)).to_dict("records") == [{"great": 0.5, "other": 0.5}]
    assert "text" in get_adapter("autogluon").modalities

    spec = load_dataset_spec("food_reviews")
    for name in ("rf", "hgb", "h2o", "flaml"):
        job = Job("unit", spec.name, "v0", name, None, 0, 0, BUDGET, {})
        result = run_job(job, spec, tmp_path / name)
        assert result.status == "skipped" and result.error == f"{name} does not handle text binary problems."
