"""Constant baseline: the training prior class probabilities, or the training mean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import labels_from_proba
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.specs import Budget

STATE_FILE = "constant.json"


class ConstantModel(FittedModel):
    def __init__(self, task: TaskInfo, priors: dict[str, float] | None, mean: float | None) -> None:
        self.task = task
        self.priors = priors  # class label text -> probability (classification)
        self.mean = mean  # training mean (regression)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if self.priors is None:
            raise NotImplementedError("regression models have no class probabilities")
        row = [self.priors.get(str(label), 0.0) for label in self.task.classes]
        return pd.DataFrame(np.tile(row, (len(X), 1)), columns=list(self.task.classes))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.priors is None:
            return np.full(len(X), self.mean, dtype=float)
        return labels_from_proba(self.predict_proba(X))

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / STATE_FILE).write_text(json.dumps({"priors": self.priors, "mean": self.mean}))


class ConstantAdapter(FrameworkAdapter):
    name = "constant"
    package = "scikit-learn"  # nothing of its own; the version shown is the project's scientific stack
    install_hint = "pip install scikit-learn"
    # It reads no feature at all, so it is the baseline of every kind of dataset.
    modalities = frozenset({"tabular", "multimodal", "text"})

    def fit(
        self,
        X: pd.DataFrame,
        y: pd.Series,
        *,
        task: TaskInfo,
        budget: Budget,
        params: dict[str, Any],
        workdir: Path,
        seed: int,
    ) -> ConstantModel:
        if task.is_classification:
            shares = y.astype(str).value_counts(normalize=True)
            return ConstantModel(task, {str(k): float(v) for k, v in shares.items()}, None)
        return ConstantModel(task, None, float(pd.to_numeric(y).mean()))

    def load(self, model_dir: Path, task: TaskInfo) -> ConstantModel:
        state = json.loads((model_dir / STATE_FILE).read_text())
        return ConstantModel(task, state["priors"], state["mean"])


ADAPTER = ConstantAdapter()
