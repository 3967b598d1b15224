"""Baseline: scikit-learn's HistGradientBoosting (native categorical and missing-value support)."""

from __future__ import annotations

from typing import Any

from tasks.frameworks._sklearn import SklearnAdapter
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import TaskInfo
from tasks.specs import Budget


class HistGradientBoostingAdapter(SklearnAdapter):
    name = "hgb"

    def estimator(
        self, schema: FeatureSchema, task: TaskInfo, budget: Budget, params: dict[str, Any], seed: int
    ) -> Any:
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        # Threads come from OMP_NUM_THREADS, which the job sets from budget.cores.
        estimator_class = (
            HistGradientBoostingClassifier if task.is_classification else HistGradientBoostingRegressor
        )
        options: dict[str, Any] = {"categorical_features": "from_dtype", "random_state": seed}
        return estimator_class(**{**options, **params})

    def test_params(self) -> dict[str, Any]:
        return {"max_iter": 10}


ADAPTER = HistGradientBoostingAdapter()
