"""hgb's ONNX graph answers as the fitted model does, categorical splits and missing values included:
on real datasets with categorical columns (credit_data, binary; penguins, multiclass; ames,
regression), on unknown and missing categories, and with wide categories fed as codes. A loss it
cannot mirror is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pandas as pd
import pytest

from tasks.data.fold_data import load_fold
from tasks.evaluations.export import ExportSettings
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import NotOffered
from tasks.frameworks.hgb import ADAPTER, MAX_NATIVE_CATEGORIES
from tasks.specs import Budget, load_dataset_spec

BUDGET = Budget(name="test", time_s=60, cores=1, memory_mb=1024, gpus=0)
TOLERANCE = ExportSettings().tolerance  # the export evaluation's parity


def _fit(X: pd.DataFrame, y: pd.Series, task: TaskInfo, tmp_path: Path, **params: object):  # noqa: ANN202
    return ADAPTER.fit(X, y, task=task, budget=BUDGET, params={"max_iter": 40, **params},
                       workdir=tmp_path, seed=0)


def _gap(model, X: pd.DataFrame) -> float:  # noqa: ANN001
    graph = model.to_onnx(Path("."))
    session = ort.InferenceSession(graph.model.SerializeToString(), providers=["CPUExecutionProvider"])
    answered = np.asarray(session.run(None, graph.feed(X))[graph.output])
    if not model.task.is_classification:
        return float(np.max(np.abs(answered.ravel() - np.asarray(model.predict(X), dtype=float))))
    assert [str(c) for c in graph.classes] == [str(c) for c in model.estimator.classes_]
    return float(np.max(np.abs(answered - model.estimator.predict_proba(model.schema.apply(X)))))


def _categorical_splits(model) -> int:  # noqa: ANN001
    final = model.estimator.steps[-1][1] if hasattr(model.estimator, "steps") else model.estimator
    return sum(int(p.nodes["is_categorical"].sum()) for iteration in final._predictors for p in iteration)


@pytest.mark.parametrize("dataset", ["credit_data", "penguins", "ames"])
def test_the_graph_answers_the_test_fold_as_the_fitted_model_does(dataset: str, tmp_path: Path) -> None:
    fold = load_fold(load_dataset_spec(dataset), 0)
    model = _fit(fold.X_train, fold.y_train, fold.task, tmp_path)
    assert _categorical_splits(model) > 0  # the categorical splits are exercised, not only thresholds
    assert fold.X_test.isna().any().any() or dataset == "penguins"  # their missing values too
    # The export evaluation's scale: a regression's tolerance grows with its values' mean.
    scale = 1.0
    if not fold.task.is_classification:
        scale = max(1.0, float(np.mean(np.abs(np.asarray(model.predict(fold.X_test), dtype=float)))))
    assert _gap(model, fold.X_test) <= TOLERANCE * scale


def _shops(rows: int, shops: int, seed: int = 0) -> tuple[pd.DataFrame, pd.Series, TaskInfo]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(rows)
    shop = rng.integers(0, shops, rows)
    X = pd.DataFrame({"x": x, "shop": pd.Categorical([f"s{i}" for i in shop])})
    X.loc[::13, "x"] = np.nan
    y = pd.Series(np.where(x + np.sin(shop) + rng.normal(scale=0.3, size=rows) > 0.3, "yes", "no"))
    task = TaskInfo(problem_type="binary", target="label", metric="auc",
                    column_roles={"x": "numeric", "shop": "categorical"}, classes=("no", "yes"))
    return X, y, task


def test_unknown_and_missing_categories_go_where_the_fitted_model_sends_them(tmp_path: Path) -> None:
    X, y, task = _shops(2_000, 8)
    seen = X["shop"] != "s7"
    model = _fit(X[seen], y[seen], task, tmp_path)  # s7 never seen at fit time
    asked = X.copy()
    asked["shop"] = asked["shop"].astype(object)
    asked.loc[::5, "shop"] = np.nan
    asked.loc[1::7, "shop"] = "a shop the schema does not know"
    assert _categorical_splits(model) > 0
    assert _gap(model, asked) <= TOLERANCE


def test_wide_categories_fed_as_codes_keep_parity(tmp_path: Path) -> None:
    X, y, task = _shops(3_000, MAX_NATIVE_CATEGORIES + 20)
    model = _fit(X, y, task, tmp_path)
    assert hasattr(model.estimator, "steps")  # the pipeline that codes the wide column first
    assert _gap(model, X.head(500)) <= TOLERANCE


def test_a_regression_loss_whose_link_the_graph_does_not_mirror_is_refused(tmp_path: Path) -> None:
    X, y, _ = _shops(600, 4)
    task = TaskInfo(problem_type="regression", target="amount", metric="rmse",
                    column_roles={"x": "numeric", "shop": "categorical"})
    amount = pd.Series(np.exp(X["x"].fillna(0.0)))
    mirrored = _fit(X, amount, task, tmp_path)
    assert _gap(mirrored, X) <= TOLERANCE * max(1.0, float(amount.mean()))
    poisson = _fit(X, amount, task, tmp_path, loss="poisson")
    with pytest.raises(NotOffered, match="hgb regression with loss 'poisson'"):
        poisson.to_onnx(tmp_path)
