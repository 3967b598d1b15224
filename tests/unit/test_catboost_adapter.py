"""CatBoost's ONNX: its own export, offered for numeric features only, answering as the model does.

The registry's conformance test (test_frameworks_contract.py) fits it on data with a categorical
column, where the export is refused; here, numeric columns only, every problem type.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tasks.evaluations.export import graph_output
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import NotOffered
from tasks.frameworks.catboost import ADAPTER
from tasks.specs import Budget

BUDGET = Budget(name="test", time_s=60, cores=1, memory_mb=1024, gpus=0)
TARGETS = {"binary": ("no", "yes"), "multiclass": ("high", "low", "mid"), "regression": ()}


@pytest.mark.parametrize("problem_type", sorted(TARGETS))
def test_a_numeric_model_exports_to_onnx_within_1e_4(problem_type: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x1": rng.normal(size=200), "x2": rng.normal(size=200)})
    classes = TARGETS[problem_type]
    y = (pd.Series(np.asarray(classes, dtype=object)[rng.integers(0, len(classes), 200)]) if classes
         else pd.Series(3 * X["x1"] + rng.normal(size=200)))
    task = TaskInfo(problem_type, "label", "auc", {"x1": "numeric", "x2": "numeric"}, classes)
    model = ADAPTER.fit(X, y, task=task, budget=BUDGET, params={"iterations": 20}, workdir=tmp_path, seed=0)

    exported = model.to_onnx(tmp_path / "onnx")
    path = tmp_path / "model.onnx"
    path.write_bytes(exported.model.SerializeToString())
    answered = graph_output(exported, path, task, threads=1)(X)
    native = (model.predict_proba(X).to_numpy() if classes
              else np.asarray(model.predict(X), dtype=float).reshape(-1, 1))
    assert answered.shape == native.shape and np.max(np.abs(answered - native)) <= 1e-4 * (
        1.0 if classes else float(np.mean(np.abs(native))))

    with_category = X.assign(shop=pd.Categorical(rng.choice(["a", "b"], 200)))
    roles = {**task.column_roles, "shop": "categorical"}
    categorical = ADAPTER.fit(with_category, y, task=TaskInfo(problem_type, "label", "auc", roles, classes),
                              budget=BUDGET, params={"iterations": 5}, workdir=tmp_path, seed=0)
    with pytest.raises(NotOffered, match="does not support categorical features"):
        categorical.to_onnx(tmp_path / "refused")
