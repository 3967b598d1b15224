"""Baseline: scikit-learn's HistGradientBoosting (native categorical and missing-value support)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tasks.frameworks._sklearn import SklearnModel
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.specs import Budget


class HistGradientBoostingAdapter(FrameworkAdapter):
    name = "hgb"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"

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
    ) -> SklearnModel:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        # Threads come from OMP_NUM_THREADS, which the job sets from budget.cores.
        estimator_class = (
            HistGradientBoostingClassifier if task.is_classification else HistGradientBoostingRegressor
        )
        options: dict[str, Any] = {"categorical_features": "from_dtype", "random_state": seed}
        estimator = estimator_class(**{**options, **framework_params})
        estimator.fit(schema.apply(X), y)
        return SklearnModel(estimator, schema, task)

    def load(self, model_dir: Path, task: TaskInfo) -> SklearnModel:
        return SklearnModel.load(model_dir, task)

    def test_params(self) -> dict[str, Any]:
        return {"max_iter": 10}


ADAPTER = HistGradientBoostingAdapter()
