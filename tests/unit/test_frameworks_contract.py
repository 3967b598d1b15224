"""One conformance test over the whole adapter registry (tabarena's habit).

Tiny data, tiny budget: fit, predict, probabilities (one column per class, rows summing to 1),
and save -> load giving the very same predictions, for every problem type an adapter declares.
Each adapter runs on the CSV files (string labels) and on Parquet copies whose labels are stored
as the user's tools store them: bool (binary), nullable integers (multiclass), with nullable
integer and Arrow string features. Both are read as the worker reads them (tasks.data.load).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import PROBLEM_TYPES, make_project

from tasks.data.load import read_parts
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.registry import all_adapters, load_saved_model, write_model_identity
from tasks.specs import Budget, DatasetSpec

# Real AutoML systems: seconds to a minute each even on tiny settings (H2O starts a JVM).
HEAVY = {"autogluon", "h2o", "flaml", "hf_finetune"}
TINY_BUDGET = Budget(name="conformance", time_s=30, cores=1, memory_mb=4096)


STORAGES = ("csv", "parquet")


def _registry_params() -> list[object]:
    return [
        pytest.param(name, storage, marks=[pytest.mark.integration] if name in HEAVY else [],
                     id=f"{name}-{storage}")
        for name in sorted(all_adapters())
        for storage in STORAGES
    ]


def _parquet_copy(spec: DatasetSpec) -> DatasetSpec:
    """The dataset as Parquet, labels and features in the types other tools write."""
    frame = pd.read_csv(spec.path)
    if spec.problem_type == "binary":
        frame["label"] = frame["label"] == "yes"  # bool labels
    elif spec.problem_type == "multiclass":
        codes = {"low": 0, "mid": 1, "high": 2}
        frame["label"] = frame["label"].map(codes).astype("Int64")  # nullable integer labels
    frame["x2"] = (frame["x2"] * 10).round().astype("Int64")  # a nullable integer feature
    frame.loc[3, "x2"] = pd.NA
    frame["color"] = frame["color"].astype("string[pyarrow]")
    path = spec.path.with_suffix(".parquet")
    frame.to_parquet(path, index=False)
    return DatasetSpec(**{**spec.model_dump(), "file": path.name})


def _task_and_frames(
    spec: DatasetSpec, train_rows: np.ndarray, test_rows: np.ndarray
) -> tuple[TaskInfo, pd.DataFrame, pd.Series, pd.DataFrame]:
    """Train X and y, test X, read and typed by the worker's loader."""
    X_train, X_test = read_parts(spec, [train_rows, test_rows], columns=spec.features)
    y = X_train.pop(spec.target)
    X_test.pop(spec.target)
    classes = ()
    if spec.problem_type != "regression":
        classes = tuple(sorted(y.cat.categories, key=str))
        y = y.astype(object)
    roles = {c: r for c, r in spec.columns.items()}
    task = TaskInfo(spec.problem_type, "label", str(spec.metric), roles, classes)
    return task, X_train, y, X_test


@pytest.mark.parametrize(("name", "storage"), _registry_params())
def test_framework_contract(
    name: str, storage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
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
            if storage == "parquet" and name in HEAVY and problem_type == "regression":
                continue  # Parquet's risk is in labels; a float target reads the same (keeps CI short)
            spec = specs[problem_type]
            if storage == "parquet":
                spec = _parquet_copy(spec)
            task, X_train, y_train, X_test = _task_and_frames(spec, np.arange(60), np.arange(60, 80))
            if storage == "parquet" and task.is_classification:
                assert all(isinstance(label, str) for label in task.classes)  # as from a CSV
            workdir = tmp_path / problem_type / "work"
            workdir.mkdir(parents=True)
            model = adapter.fit(
                X_train, y_train,
                task=task, budget=TINY_BUDGET, params=adapter.test_params(), workdir=workdir, seed=0,
            )
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
