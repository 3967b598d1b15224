"""One conformance test over the whole adapter registry (tabarena's habit).

Tiny data, tiny budget: fit, predict, probabilities (one column per class, rows summing to 1),
and save -> load giving the very same predictions, for every problem type an adapter declares;
then what each adapter says it takes (applies_to) and what its fitted models say they offer
(tests/unit/test_frameworks_contract.py::test_framework_capabilities).
Each adapter runs on the CSV files (string labels) and on Parquet copies whose labels are stored
as the user's tools store them: bool (binary), nullable integers (multiclass), with nullable
integer and Arrow string features. Both are read as the worker reads them (tasks.data.load).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from jobs_support.tiny_project import (
    FORECAST_HORIZON,
    PROBLEM_TYPES,
    make_forecasting_project,
    make_image_project,
    make_project,
)

from tasks.data.load import read_parts
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.frameworks.capabilities import NotOffered, OnnxCompiled, OnnxGraph
from tasks.frameworks.registry import all_adapters, load_saved_model, write_model_identity
from tasks.specs import Budget, DatasetSpec

# Real AutoML systems: seconds to a minute each even on tiny settings (H2O starts a JVM).
HEAVY = {"autogluon", "h2o", "flaml", "hf_finetune", "autogluon_ts", "autogluon_mm"}
# Each framework's test_params bound its work (a few rounds, models or steps), so the time limit only
# has to leave room: on two cores busy with other work AutoGluon once trained nothing in 30 s on 60
# rows. An idle machine finishes these fits in seconds whatever the limit.
TINY_BUDGET = Budget(name="conformance", time_s=300, cores=1, memory_mb=4096)


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
    # An image-only adapter gets images: PNG files named by a labels table, then a Parquet of PNGs.
    images = "image" in adapter.modalities and "tabular" not in adapter.modalities
    image_storage = "files" if storage == "csv" else storage
    specs = (make_image_project(tmp_path / "project", rows=80, storage=image_storage)
             if images else make_project(tmp_path / "project", rows=80))
    adapter.start(TINY_BUDGET, tmp_path / "start")
    try:
        for problem_type in PROBLEM_TYPES:
            if problem_type not in adapter.problem_types:
                continue
            if storage == "parquet" and name in HEAVY and problem_type == "regression":
                continue  # Parquet's risk is in labels; a float target reads the same (keeps CI short)
            spec = specs[problem_type]
            if storage == "parquet" and not images:
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
        if "forecasting" in adapter.problem_types:
            monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "forecasting"))
            _forecasting_contract(adapter, tmp_path / "forecasting", storage)
    finally:
        adapter.stop()


def _forecasting_contract(adapter: FrameworkAdapter, root: Path, storage: str) -> None:
    """Forecasts of every test point (the fold as the worker loads it), finite, ordered quantiles at
    the asked levels, and the same forecasts after save -> load."""
    from tasks.data.fold_data import load_fold
    from tasks.metric_registry import quantile_column

    spec = make_forecasting_project(root)
    if storage == "parquet":
        frame = pd.read_csv(spec.path)
        frame["month"] = pd.to_datetime(frame["month"])  # real timestamps, as Parquet writers keep them
        frame.to_parquet(spec.path.with_suffix(".parquet"), index=False)
        spec = DatasetSpec(**{**spec.model_dump(), "file": f"{spec.name}.parquet"})
    fold = load_fold(spec, 0)
    assert fold.task.forecast is not None and len(fold.X_test) == 3 * FORECAST_HORIZON
    model = adapter.fit(fold.X_train, fold.y_train, task=fold.task, budget=TINY_BUDGET,
                        params=adapter.test_params(), workdir=root / "work", seed=0)
    predicted = np.asarray(model.predict(fold.X_test), dtype=float)
    assert len(predicted) == len(fold.X_test) and np.isfinite(predicted).all()
    quantiles = model.predict_quantiles(fold.X_test)
    if quantiles is not None:
        levels = fold.task.forecast.quantile_levels
        assert list(quantiles.columns) == [quantile_column(level) for level in levels]
        assert len(quantiles) == len(fold.X_test)
        assert (np.diff(quantiles.to_numpy(dtype=float), axis=1) >= -1e-9).all()  # q0.1 <= q0.5 <= q0.9
    model.save(root / "model")
    write_model_identity(root / "model", adapter, fold.task)
    reloaded, reloaded_task = load_saved_model(root / "model")
    assert reloaded_task == fold.task
    np.testing.assert_allclose(np.asarray(reloaded.predict(fold.X_test), dtype=float), predicted)


# ---------------------------------------------------------------- capabilities, asked of every model


def _one_line(reason: object) -> bool:
    return isinstance(reason, str) and bool(reason.strip()) and "\n" not in reason


def _native_output(model: FittedModel, task: TaskInfo, X: pd.DataFrame) -> np.ndarray:
    if task.is_classification:
        return model.predict_proba(X).to_numpy(dtype=float)
    return np.asarray(model.predict(X), dtype=float).reshape(-1, 1)


def _check_capabilities(model: FittedModel, task: TaskInfo, X: pd.DataFrame, y: pd.Series,
                        folder: Path) -> dict[str, str]:
    """Each capability the model offers works; each it refuses says why in one line. Returns what
    was offered, in words, for the test's own assertions."""
    import shap

    from tasks.evaluations.export import graph_output

    offered: dict[str, str] = {}
    folder.mkdir(parents=True)
    try:
        trees = model.tree_ensemble()
    except NotOffered as exc:
        assert _one_line(str(exc)), exc
    else:
        matrix = trees.transform(X)
        values = np.asarray(shap.TreeExplainer(trees.estimator).shap_values(matrix, check_additivity=False))
        assert len(trees.columns) == np.asarray(matrix).shape[1] and set(trees.columns) <= set(X.columns)
        assert len(X) in values.shape and np.isfinite(values).all()
        offered["tree_ensemble"] = type(trees.estimator).__name__
    try:
        exported = model.to_onnx(folder)
    except NotOffered as exc:
        assert _one_line(str(exc)), exc
    else:
        native = _native_output(model, task, X)
        if isinstance(exported, OnnxGraph):
            path = folder / "model.onnx"
            path.write_bytes(exported.model.SerializeToString())
            answered = graph_output(exported, path, task, threads=1)(X)
        else:
            assert isinstance(exported, OnnxCompiled)
            answered = exported.output(X)
        scale = 1.0 if task.is_classification else max(1.0, float(np.mean(np.abs(native))))
        gap = float(np.max(np.abs(native - answered)))
        assert gap <= 1e-4 * scale, f"ONNX parity {gap} over {1e-4 * scale}"
        assert _one_line(exported.covers)
        offered["onnx"] = f"parity {gap:.2g}"
    if model.native_importance_kind is None:
        with pytest.raises(NotOffered):
            model.native_importance(X, y, time_limit_s=30)
    else:
        try:
            importance = model.native_importance(X, y, time_limit_s=30)
        except NotOffered as exc:  # declared, but this fitted model has none (an H2O leader without varimp)
            assert _one_line(str(exc)), exc
        else:
            assert importance.kind == model.native_importance_kind
            assert {"feature", "importance"} <= set(importance.table.columns)
            offered["native_importance"] = importance.kind
    if model.native_artifact_kind is None:
        with pytest.raises(NotOffered):
            model.native_artifact(folder)
    else:
        try:
            artifact = model.native_artifact(folder)
        except NotOffered as exc:  # declared, refused by this client (an H2O OSS build without MOJO)
            assert _one_line(str(exc)), exc
        else:
            assert artifact.kind == model.native_artifact_kind and artifact.path.is_file()
            offered["native_artifact"] = artifact.kind
    try:
        pattern = model.text_tokens()
    except NotOffered as exc:
        assert _one_line(str(exc)), exc
    else:
        assert re.split(pattern, "two words") == ["two", "words"]
        offered["text_tokens"] = pattern
    return offered


def _capability_params() -> list[object]:
    return [pytest.param(name, marks=[pytest.mark.integration] if name in HEAVY else [], id=name)
            for name in sorted(all_adapters())]


@pytest.mark.parametrize("name", _capability_params())
def test_framework_capabilities(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What an adapter says it takes (applies_to) and what its fitted models say they offer
    (tree ensemble, ONNX with parity, own importance, own file, text tokens) hold for every
    framework of the registry; a refusal is always one line saying why."""
    adapter = all_adapters()[name]
    assert all(isinstance(package, str) and package for package in adapter.serving_packages)
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    images = "image" in adapter.modalities and "tabular" not in adapter.modalities  # a Parquet of PNGs
    project = tmp_path / "project"
    specs = make_image_project(project, rows=80) if images else make_project(project, rows=80)
    for spec in specs.values():
        for modality in ("tabular", "text"):
            card = DatasetSpec(**{**spec.model_dump(), "modality": modality})
            reason = adapter.applies_to(card)
            if card.problem_type not in adapter.problem_types or modality not in adapter.modalities:
                assert _one_line(reason), f"{name} claims to take {modality} {card.problem_type}"
            assert reason is None or _one_line(reason)
    if adapter.unavailable_reason():
        pytest.skip(adapter.unavailable_reason())
    adapter.start(TINY_BUDGET, tmp_path / "start")
    try:
        for problem_type in PROBLEM_TYPES:
            if problem_type not in adapter.problem_types:
                continue
            spec = specs[problem_type]
            task, X_train, y_train, X_test = _task_and_frames(spec, np.arange(60), np.arange(60, 80))
            workdir = tmp_path / problem_type / "work"
            workdir.mkdir(parents=True)
            model = adapter.fit(X_train, y_train, task=task, budget=TINY_BUDGET, params=adapter.test_params(),
                                workdir=workdir, seed=0)
            # ONNX tree ensembles route missing values their own way (the images have none).
            complete = X_test["x1"].notna() if "x1" in X_test else pd.Series(True, index=X_test.index)
            table = pd.read_parquet(spec.path) if spec.path.suffix == ".parquet" else pd.read_csv(spec.path)
            y_test = table[spec.target].iloc[60:80].reset_index(drop=True)
            offered = _check_capabilities(model, task, X_test[complete.to_numpy()],
                                          y_test[complete.to_numpy()], tmp_path / problem_type / "offered")
            if name in EXPECTED_OFFERS:  # the shipped baselines: what they are known to offer
                assert set(offered) == EXPECTED_OFFERS[name], offered
    finally:
        adapter.stop()


# What the light frameworks' models offer, as a floor: a capability lost by a refactor is caught.
EXPECTED_OFFERS = {
    "constant": {"onnx"},
    # The tiny data has a categorical column: shap cannot read native category splits; hgb's own ONNX
    # graph writes them as set tests (tasks/frameworks/_hgb_onnx.py).
    "hgb": {"onnx"},
    "rf": {"onnx", "tree_ensemble"},
    # The whole booster converts (onnxmltools); a converter error fails the test, never "not offered".
    "xgboost": {"onnx", "tree_ensemble"},
    # Native category splits: shap reads them, onnxmltools converts them; its gain per feature.
    "lightgbm": {"onnx", "tree_ensemble", "native_importance"},
    # Categories stay native (its target statistics): CatBoost's ONNX export refuses those models
    # (numeric ones export: tests/unit/test_catboost_adapter.py).
    "catboost": {"tree_ensemble", "native_importance"},
    # A glass box: its explanation is its own term importances (no trees shap reads, no ONNX converter).
    "ebm": {"native_importance"},
}
