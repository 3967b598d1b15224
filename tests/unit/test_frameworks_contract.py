"""One conformance test over the whole adapter registry (tabarena's habit).

Tiny data, tiny budget: fit, predict, probabilities (one column per class, rows summing to 1),
and save -> load giving the very same predictions, for every problem type an adapter declares.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import PROBLEM_TYPES, make_project

from tasks.frameworks.base import TaskInfo
from tasks.frameworks.registry import all_adapters, load_saved_model, write_model_identity
from tasks.specs import Budget

# Real AutoML systems: seconds to a minute each even on tiny settings (H2O starts a JVM).
HEAVY = {"autogluon", "h2o", "flaml", "hf_finetune"}
TINY_BUDGET = Budget(name="conformance", time_s=30, cores=1, memory_mb=4096)


def _registry_params() -> list[object]:
    return [
        pytest.param(name, marks=[pytest.mark.integration] if name in HEAVY else [], id=name)
        for name in sorted(all_adapters())
    ]


def _task_and_frames(spec: object, frame: pd.DataFrame) -> tuple[TaskInfo, pd.DataFrame, pd.Series]:
    features = [c for c in frame.columns if c != "label"]
    y = frame["label"]
    classes = tuple(sorted(y.unique(), key=str)) if spec.problem_type != "regression" else ()
    roles = {c: r for c, r in spec.columns.items()}
    task = TaskInfo(spec.problem_type, "label", str(spec.metric), roles, classes)
    X = frame[features].copy()
    X["color"] = X["color"].astype("category")
    return task, X, y


@pytest.mark.parametrize("name", _registry_params())
def test_framework_contract(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    adapter = all_adapters()[name]
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    specs = make_project(tmp_path / "project", rows=80)
    adapter.start(TINY_BUDGET, tmp_path / "start")
    try:
        for problem_type in PROBLEM_TYPES:
            if problem_type not in adapter.problem_types:
                continue
            spec = specs[problem_type]
            frame = pd.read_csv(spec.path)
            task, X, y = _task_and_frames(spec, frame)
            train, test = slice(0, 60), slice(60, None)
            workdir = tmp_path / problem_type / "work"
            workdir.mkdir(parents=True)
            model = adapter.fit(
                X.iloc[train].reset_index(drop=True), y.iloc[train].reset_index(drop=True),
                task=task, budget=TINY_BUDGET, params=adapter.test_params(), workdir=workdir, seed=0,
            )
            X_test = X.iloc[test].reset_index(drop=True)
            predicted = np.asarray(model.predict(X_test))
            assert len(predicted) == len(X_test)
            assert model.models_count >= 1

            model_dir = tmp_path / problem_type / "model"
            model.save(model_dir)
            write_model_identity(model_dir, adapter, task)
            reloaded, reloaded_task = load_saved_model(model_dir)
            assert reloaded_task == task
            np.testing.assert_array_equal(np.asarray(reloaded.predict(X_test)), predicted)

            if task.is_classification:
                assert set(map(str, predicted)) <= set(map(str, task.classes))
                proba = model.predict_proba(X_test)
                assert list(proba.columns) == list(task.classes)
                assert len(proba) == len(X_test)
                np.testing.assert_allclose(proba.sum(axis=1).to_numpy(), 1.0, atol=1e-6)
                assert ((proba.to_numpy() >= 0) & (proba.to_numpy() <= 1)).all()
                pd.testing.assert_frame_equal(reloaded.predict_proba(X_test), proba, atol=1e-9)
            else:
                assert np.isfinite(predicted.astype(float)).all()
    finally:
        adapter.stop()
