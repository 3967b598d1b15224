"""Baseline: scikit-learn's RandomForest, categorical columns ordinal-encoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from tasks.frameworks._sklearn import SklearnModel
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.specs import Budget


class RandomForestAdapter(FrameworkAdapter):
    name = "rf"
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
        from sklearn.compose import ColumnTransformer
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OrdinalEncoder

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        encoder = ColumnTransformer(
            # Unknown and missing categories both become -1; numeric NaN goes to the forest as is
            # (scikit-learn's trees route missing values since 1.4).
            [("categories", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                           encoded_missing_value=-1), list(schema.levels))],
            remainder="passthrough",
        )
        forest_class = RandomForestClassifier if task.is_classification else RandomForestRegressor
        options: dict[str, Any] = {"n_jobs": budget.cores, "random_state": seed}
        forest = forest_class(**{**options, **framework_params})
        estimator = Pipeline([("encode", encoder), ("forest", forest)])
        estimator.fit(schema.apply(X), y)
        return SklearnModel(estimator, schema, task)

    def load(self, model_dir: Path, task: TaskInfo) -> SklearnModel:
        return SklearnModel.load(model_dir, task)

    def test_params(self) -> dict[str, Any]:
        return {"n_estimators": 10}


ADAPTER = RandomForestAdapter()
