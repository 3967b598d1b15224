"""A test-only adapter whose fitting and predicting take time in proportion to the rows, as a random
forest's do, at rates small enough for a job of a few seconds: `slowpredict`.

Its row cap is tasks/frameworks/_sampling.py's RowCap with its rates, so the cap sizes the fit as it
sizes rf's. Loaded through AUTOML_EVAL_EXTRA_ADAPTERS (a file path).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._sampling import RowCap, Sampled
from tasks.frameworks._tabular import labels_from_proba
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.specs import Budget

CELLS_PER_SECOND = 800.0  # rows x columns fitted per second on one core (200 rows of the tiny data)
PREDICT_ROWS_PER_SECOND = 1_000.0  # rows predicted per second on one core, per pass
ROW_CAP = RowCap("slowpredict", CELLS_PER_SECOND * 60, peak_memory_per_data=1.0,
                 predict_rows_per_core_minute=PREDICT_ROWS_PER_SECOND * 60)
PRIOR_FILE = "prior.json"


class SlowPredictModel(FittedModel):
    """The training classes' shares, answered after a wait in proportion to the rows asked."""

    def __init__(self, prior: dict[str, float], task: TaskInfo, sampled: Sampled | None = None) -> None:
        self.prior = prior
        self.task = task
        self.sampled = sampled

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        time.sleep(len(X) / PREDICT_ROWS_PER_SECOND)
        return pd.DataFrame({label: np.full(len(X), self.prior.get(str(label), 0.0))
                             for label in self.task.classes})

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return labels_from_proba(self.predict_proba(X))

    def info(self) -> dict[str, Any]:
        return {"sampled": self.sampled.sentence()} if self.sampled else {}

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / PRIOR_FILE).write_text(json.dumps(self.prior))


class SlowPredictAdapter(FrameworkAdapter):
    name = "slowpredict"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"
    problem_types = frozenset({"binary", "multiclass"})

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> SlowPredictModel:
        adapter_params, _ = split_params(params)
        X, y, sampled = ROW_CAP.sample(X, y, budget, adapter_params, seed, stratify=True, task=task)
        time.sleep(X.shape[0] * X.shape[1] / CELLS_PER_SECOND / budget.cores)
        prior = y.astype(str).value_counts(normalize=True)
        return SlowPredictModel({str(k): float(v) for k, v in prior.items()}, task, sampled)

    def load(self, model_dir: Path, task: TaskInfo) -> SlowPredictModel:
        return SlowPredictModel(json.loads((model_dir / PRIOR_FILE).read_text()), task)


ADAPTER = SlowPredictAdapter()
