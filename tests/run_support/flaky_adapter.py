"""A test-only adapter that fails while a marker file exists, then behaves like `constant`.

Loaded through AUTOML_EVAL_EXTRA_ADAPTERS; the marker's path comes from FLAKY_MARKER, which the
job's child process inherits. Lets a test make a job fail once and succeed when retried.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.frameworks.constant import ADAPTER as CONSTANT
from tasks.specs import Budget

MARKER_ENV = "FLAKY_MARKER"


class FlakyAdapter(FrameworkAdapter):
    name = "flaky"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> FittedModel:
        marker = os.environ.get(MARKER_ENV)
        if marker and Path(marker).exists():
            raise RuntimeError("flaky adapter: failing on purpose while the marker exists")
        return CONSTANT.fit(X, y, task=task, budget=budget, params=params, workdir=workdir, seed=seed)

    def load(self, model_dir: Path, task: TaskInfo) -> FittedModel:
        return CONSTANT.load(model_dir, task)


ADAPTER = FlakyAdapter()
