"""A test-only adapter that fails while a marker file exists, then behaves like `constant`.

Loaded through AUTOML_EVAL_EXTRA_ADAPTERS; the marker's path comes from FLAKY_MARKER, which the
job's child process inherits. Lets a test make a job fail once and succeed when retried. While the
file named by FLAKY_HOLD exists, fit waits first: a test that interrupts a suite mid-job holds the
job there, however fast jobs start.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pandas as pd

from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.frameworks.constant import ADAPTER as CONSTANT
from tasks.specs import Budget

MARKER_ENV = "FLAKY_MARKER"
HOLD_ENV = "FLAKY_HOLD"


class FlakyAdapter(FrameworkAdapter):
    name = "flaky"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> FittedModel:
        hold = os.environ.get(HOLD_ENV)
        while hold and Path(hold).exists():
            time.sleep(0.1)
        marker = os.environ.get(MARKER_ENV)
        if marker and Path(marker).exists():
            raise RuntimeError("flaky adapter: failing on purpose while the marker exists")
        return CONSTANT.fit(X, y, task=task, budget=budget, params=params, workdir=workdir, seed=seed)

    def load(self, model_dir: Path, task: TaskInfo) -> FittedModel:
        return CONSTANT.load(model_dir, task)


ADAPTER = FlakyAdapter()
