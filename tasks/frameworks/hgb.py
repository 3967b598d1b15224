"""Baseline: scikit-learn's HistGradientBoosting (native categorical and missing-value support)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.frameworks._sklearn import SklearnAdapter
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import TaskInfo
from tasks.specs import Budget

MAX_NATIVE_CATEGORIES = 255


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
        model = estimator_class(**{**options, **params})
        # Native categories hold at most max_bins (255) levels; a column with more goes in as its
        # ordinal codes (unknown and missing -> NaN), as a number HGB bins like any other.
        wide = [c for c, levels in schema.levels.items() if len(levels) > MAX_NATIVE_CATEGORIES]
        if not wide:
            return model
        from sklearn.compose import ColumnTransformer
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OrdinalEncoder

        encoder = ColumnTransformer(
            [("codes", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan,
                                      encoded_missing_value=np.nan), wide)],
            remainder="passthrough",
            verbose_feature_names_out=False,
        ).set_output(transform="pandas")
        return Pipeline([("encode", encoder), ("boost", model)])

    def test_params(self) -> dict[str, Any]:
        return {"max_iter": 10}


ADAPTER = HistGradientBoostingAdapter()
