"""Baseline: scikit-learn's RandomForest, categorical columns ordinal-encoded."""

from __future__ import annotations

from typing import Any

import numpy as np

from tasks.frameworks._sampling import RowCap
from tasks.frameworks._sklearn import SklearnAdapter, SklearnModel
from tasks.frameworks._tabular import FeatureSchema
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import TreeEnsemble
from tasks.specs import Budget

# A forest of fully grown trees costs about n log n per tree and predicting the test part grows
# with the trees' depth. Measured on the loaded 2-core machine: 100 trees on 50,000 rows x 30
# columns in 41 s, and 31 s to predict 1,000,000 rows with them. So it is fitted on at most this
# many cells (rows x columns) per core and minute of time_s (50,000 rows of 30 columns at 1m2c) ...
CELLS_PER_CORE_MINUTE = 750_000
# ... and on as many rows as fit memory_mb, its peak being about this many times the in-memory
# size of the rows it is given (the encoded float copy, bootstrap indices, the trees).
PEAK_MEMORY_PER_DATA = 8
# Predicting the test part comes out of the same time: 1,000,000 rows in 31 s on 2 cores (above) is
# about 970,000 rows per core-minute, and a classifier is asked twice (labels, then probabilities).
# At 10 M rows under 1m2c (1 M test rows) predicting alone took the rest of the watchdog's limit.
PREDICT_ROWS_PER_CORE_MINUTE = 950_000
ROW_CAP = RowCap("rf", CELLS_PER_CORE_MINUTE, PEAK_MEMORY_PER_DATA, PREDICT_ROWS_PER_CORE_MINUTE)


class RandomForestModel(SklearnModel):
    def tree_ensemble(self) -> TreeEnsemble:
        encoder, forest = self.estimator[:-1], self.estimator[-1]
        schema = self.schema
        # The encoder puts categorical columns first, then the rest: map its output names back.
        names = [name.split("__", 1)[1] for name in encoder.get_feature_names_out()]
        return TreeEnsemble(forest, lambda X: np.asarray(encoder.transform(schema.apply(X)), dtype=float),
                            names)


class RandomForestAdapter(SklearnAdapter):
    name = "rf"
    fixed_work = True  # n_estimators trees (on the rows its row cap allows: fit_rows says how many)
    model_class = RandomForestModel
    row_cap = ROW_CAP

    def estimator(
        self, schema: FeatureSchema, task: TaskInfo, budget: Budget, params: dict[str, Any], seed: int
    ) -> Any:
        from sklearn.compose import ColumnTransformer
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import OrdinalEncoder

        encoder = ColumnTransformer(
            # Unknown and missing categories both become -1; numeric NaN goes to the forest as is
            # (scikit-learn's trees route missing values since 1.4).
            [("categories", OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1,
                                           encoded_missing_value=-1), list(schema.levels))],
            remainder="passthrough",
        )
        forest_class = RandomForestClassifier if task.is_classification else RandomForestRegressor
        options: dict[str, Any] = {"n_jobs": budget.cores, "random_state": seed}
        return Pipeline([("encode", encoder), ("forest", forest_class(**{**options, **params}))])

    def test_params(self) -> dict[str, Any]:
        return {"n_estimators": 10}


ADAPTER = RandomForestAdapter()
