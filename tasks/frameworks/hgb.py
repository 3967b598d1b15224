"""Baseline: scikit-learn's HistGradientBoosting (native categorical and missing-value support),
boosting until its rounds are done or the budget's time is spent, whichever comes first."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._hgb_onnx import hgb_graph
from tasks.frameworks._sklearn import SklearnAdapter, SklearnModel
from tasks.frameworks._tabular import FeatureSchema, search_seconds, shared_columns
from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import NotOffered, OnnxGraph, TreeEnsemble
from tasks.specs import Budget

MAX_NATIVE_CATEGORIES = 255
# Boosting stops after the round in which the fit's time ran out; a round takes about a second
# at 10 M rows on 2 cores, so keep that much (and the model's saving) in reserve.
TIME_LIMIT_SHARE = 0.95
TIME_RESERVE_S = 2.0


def category_codes(X: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """`columns` (categories with the schema's fixed levels) as their codes, a number, with NaN for
    a missing or unknown value; the other columns as they are, shared, not copied.

    Native categories hold at most max_bins (255) levels: a wider column goes in as a number HGB
    bins like any other. The schema fixes its levels, so a code means the same level at fit and
    at predict time. (Not an OrdinalEncoder: its pandas output copies the whole frame, 17.6 s
    and 2 GB at 9 M rows.)"""
    frame = shared_columns(X, list(X.columns))
    for column in columns:
        codes = X[column].cat.codes.to_numpy()
        frame[column] = np.where(codes < 0, np.nan, codes.astype(np.float64))
    return frame


class HistGradientBoostingModel(SklearnModel):
    def to_onnx(self, folder: Path) -> OnnxGraph:
        # Not skl2onnx's converter: it writes categorical splits as thresholds, wrong without an error.
        return hgb_graph(self.estimator, self.schema, self.task)

    def tree_ensemble(self) -> TreeEnsemble:
        if self.schema.levels:
            # shap reads HistGradientBoosting's numeric splits only, not its categorical bitsets.
            raise NotOffered("hgb with categorical features: shap's tree explainer cannot read category "
                             "splits")
        schema = self.schema
        return TreeEnsemble(self.estimator, lambda X: schema.apply(X).to_numpy(dtype=float),
                            list(schema.columns))


class HistGradientBoostingAdapter(SklearnAdapter):
    name = "hgb"
    fixed_work = True  # max_iter rounds (or early stopping's), unless the budget's time runs out first
    model_class = HistGradientBoostingModel

    def estimator(
        self, schema: FeatureSchema, task: TaskInfo, budget: Budget, params: dict[str, Any], seed: int
    ) -> Any:
        from tasks.frameworks._hgb_timed import (  # inside: scikit-learn, loaded when fitted
            TimedHistGradientBoostingClassifier,
            TimedHistGradientBoostingRegressor,
        )

        # Threads come from OMP_NUM_THREADS, which the job sets from budget.cores.
        estimator_class = (
            TimedHistGradientBoostingClassifier if task.is_classification
            else TimedHistGradientBoostingRegressor
        )
        options: dict[str, Any] = {"categorical_features": "from_dtype", "random_state": seed}
        model = estimator_class(**{**options, **params})
        model.fit_time_limit_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        wide = [c for c, levels in schema.levels.items() if len(levels) > MAX_NATIVE_CATEGORIES]
        if not wide:
            return model
        from sklearn.pipeline import Pipeline
        from sklearn.preprocessing import FunctionTransformer

        encoder = FunctionTransformer(category_codes, kw_args={"columns": wide})
        return Pipeline([("encode", encoder), ("boost", model)])

    def test_params(self) -> dict[str, Any]:
        return {"max_iter": 10}


ADAPTER = HistGradientBoostingAdapter()
