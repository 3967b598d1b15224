"""LightGBM's ONNX graph answers as the booster does on values that sit on its split thresholds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer

from tasks.evaluations.export import graph_output
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.lightgbm import ADAPTER
from tasks.specs import Budget

BUDGET = Budget(name="test", time_s=60, cores=1, memory_mb=1024, gpus=0)


def test_onnx_parity_holds_on_values_that_sit_on_its_thresholds(tmp_path: Path) -> None:
    # breast_cancer (scikit-learn ships it): measurements of few decimals, so rows predicted hold the
    # very values thresholds were placed beside; there double and float32 thresholds disagreed.
    data = load_breast_cancer(as_frame=True)
    X, y = data.data, pd.Series(np.where(data.target == 1, "yes", "no"), dtype=object)
    task = TaskInfo("binary", "label", "auc", dict.fromkeys(X.columns, "numeric"), ("no", "yes"))
    model = ADAPTER.fit(X.iloc[:400], y.iloc[:400], task=task, budget=BUDGET, params={}, workdir=tmp_path,
                        seed=0)
    X = X.iloc[400:]

    exported = model.to_onnx(tmp_path)
    path = tmp_path / "model.onnx"
    path.write_bytes(exported.model.SerializeToString())
    answered = graph_output(exported, path, task, threads=1)(X)
    assert np.max(np.abs(answered - model.predict_proba(X).to_numpy())) <= 1e-4


def test_a_served_booster_answers_labels_and_probabilities_from_one_pass(tmp_path: Path) -> None:
    data = load_breast_cancer(as_frame=True)
    X, y = data.data, pd.Series(np.where(data.target == 1, "yes", "no"), dtype=object)
    task = TaskInfo("binary", "label", "auc", dict.fromkeys(X.columns, "numeric"), ("no", "yes"))
    model = ADAPTER.fit(X.iloc[:400], y.iloc[:400], task=task, budget=BUDGET, params={}, workdir=tmp_path,
                        seed=0)
    calls = []
    booster_probabilities = model._probabilities
    model._probabilities = lambda matrix: calls.append(1) or booster_probabilities(matrix)
    labels, proba = model.predict_with_proba(X.iloc[400:])
    assert len(calls) == 1
    model._probabilities = booster_probabilities
    assert list(labels) == list(model.predict(X.iloc[400:]))
    pd.testing.assert_frame_equal(proba, model.predict_proba(X.iloc[400:]))
