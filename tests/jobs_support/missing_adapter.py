"""A test-only adapter whose framework is not installed, to see how that is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.specs import Budget

INSTALL_HINT = "pip install automl-eval-no-such-framework"


class MissingAdapter(FrameworkAdapter):
    name = "missing"
    package = "automl-eval-no-such-framework"
    install_hint = INSTALL_HINT

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
    ) -> FittedModel:
        import automl_eval_no_such_framework  # noqa: F401

        raise AssertionError("unreachable: the framework is not installed")

    def load(self, model_dir: Path, task: TaskInfo) -> FittedModel:
        raise AssertionError("unreachable: the framework is not installed")


ADAPTER = MissingAdapter()
