"""EBM: InterpretML's Explainable Boosting Machine, a glass-box model. Each feature (and each pair
interactions detects) gets a shape function learnt by cyclic boosting, bagged `outer_bags` times;
the prediction is their sum, so the model's own term importances are its explanation.

Categorical columns go in with the levels fixed at fit time (EBM treats them as nominal; a missing or
unknown level is missing). Boosting in every bag stops after the step in which the budget's time ran
out, through EBM's own callback. Saved with joblib (interpret has no model format of its own that it
loads again). Not a tree ensemble shap reads, and interpret has no ONNX converter.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import (
    FeatureSchema,
    labels_from_proba,
    numbers_as_float,
    proba_frame,
    search_seconds,
)
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import NativeImportance
from tasks.specs import Budget

ESTIMATOR_FILE = "ebm.joblib"
# Boosting stops after the step in which the fit's time ran out; EBM's other stages (binning,
# interaction detection, merging the bags) are not stopped. Under `test` (20 s, 1 core) with a limit of
# 18 s its fits took 14.2 to 19.5 s on the smoke datasets, so it gets less.
TIME_LIMIT_SHARE = 0.8
TIME_RESERVE_S = 3.0


def ebm_frame(X: pd.DataFrame, schema: FeatureSchema) -> pd.DataFrame:
    """The model's columns as EBM reads them: categories with their fixed levels, numbers as float."""
    return numbers_as_float(schema.apply(X), schema)


class _StopAtDeadline:
    """EBM's callback: True (stop) once the wall clock passes `deadline`. EBM calls it in each bag's
    process, so it holds a wall-clock time, and it must pickle: a plain class, no closure."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline

    def __call__(self, bag: int, steps: int, progress: bool, metric: float) -> bool:
        return time.time() > self.deadline


class EBMModel(FittedModel):
    native_importance_kind = "ebm term importance"

    def __init__(self, estimator: Any, schema: FeatureSchema, task: TaskInfo, stopped: bool = False) -> None:
        self.estimator = estimator
        self.schema = schema
        self.task = task
        self.stopped = stopped  # its boosting was stopped by the budget's time (not known once loaded)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return np.asarray(self.estimator.predict(ebm_frame(X, self.schema)), dtype=float)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = self.estimator.predict_proba(ebm_frame(X, self.schema))
        return proba_frame(matrix, list(self.estimator.classes_), self.task)

    def save(self, model_dir: Path) -> None:
        import joblib

        model_dir.mkdir(parents=True, exist_ok=True)
        # The callback is the fit's deadline: nothing a loaded model needs.
        self.estimator.set_params(callback=None)
        joblib.dump(self.estimator, model_dir / ESTIMATOR_FILE)
        self.schema.save(model_dir)

    def info(self) -> dict[str, Any]:
        return {"terms": len(self.estimator.term_features_), "stopped_by_time": self.stopped,
                "interactions": sum(len(term) > 1 for term in self.estimator.term_features_)}

    def stopped_by_time(self) -> bool:
        return self.stopped

    def native_importance(self, X: pd.DataFrame, y: pd.Series, time_limit_s: float) -> NativeImportance:
        # Each term's mean absolute contribution on the training data (EBM's own), a pair's shared
        # equally by its two features, so that the table names features only.
        columns = list(self.schema.columns)
        shares: dict[str, float] = dict.fromkeys(columns, 0.0)
        importances = self.estimator.term_importances()
        for term, importance in zip(self.estimator.term_features_, importances, strict=True):
            for index in term:
                shares[columns[index]] += float(importance) / len(term)
        table = pd.DataFrame({"feature": list(shares), "importance": list(shares.values())})
        return NativeImportance(self.native_importance_kind or "", table)


class EBMAdapter(FrameworkAdapter):
    name = "ebm"
    package = "interpret-core"
    install_hint = "pip install interpret-core==0.7.8 (or interpret, with its dashboard)"
    fixed_work = True  # its rounds and early stopping, bagged outer_bags times; the time only caps it

    def start(self, budget: Budget, workdir: Path) -> None:
        import interpret.glassbox  # noqa: F401 - its imports belong to start-up, not to the search

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
    ) -> EBMModel:
        from interpret.glassbox import ExplainableBoostingClassifier, ExplainableBoostingRegressor

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        limit_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        started = time.time()
        options: dict[str, Any] = {"n_jobs": budget.cores, "random_state": seed,
                                   "callback": _StopAtDeadline(started + limit_s)}
        classifier = task.is_classification
        estimator_class = ExplainableBoostingClassifier if classifier else ExplainableBoostingRegressor
        estimator = estimator_class(**{**options, **framework_params})
        target = y.astype(str) if classifier else pd.to_numeric(y).astype(float)
        estimator.fit(ebm_frame(X, schema), target)
        return EBMModel(estimator, schema, task, stopped=time.time() - started > limit_s)

    def load(self, model_dir: Path, task: TaskInfo) -> EBMModel:
        import joblib

        return EBMModel(joblib.load(model_dir / ESTIMATOR_FILE), FeatureSchema.load(model_dir), task)

    def test_params(self) -> dict[str, Any]:
        return {"outer_bags": 1, "max_rounds": 100, "interactions": 1}


ADAPTER = EBMAdapter()
