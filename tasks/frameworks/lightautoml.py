"""LightAutoML (Sber AI Lab): AMLB's `lightautoml`, its TabularAutoML preset: linear models and
gradient-boosted trees (LightGBM, CatBoost) on cross-validation folds, LightGBM tuned while time
allows, blended.

The budget is its own settings: `timeout` (seconds), `cpu_limit` (cores), `memory_limit` (GB);
its reader is seeded. Categorical columns go in as strings of the levels fixed at fit time (LightAutoML
infers the roles and encodes them itself); classes as the codes of the task's order, so its outputs'
columns are those codes. Saved with joblib, as LightAutoML's own documentation does. Runs in an
environment of its own (`lightautoml@0.4.2`: it needs xgboost<3 and pulls torch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import (
    FeatureSchema,
    encoded_target,
    labels_from_proba,
    numbers_as_float,
    proba_frame,
    search_seconds,
)
from tasks.frameworks.base import FittedModel, FrameworkAdapter, NoModelTrained, TaskInfo, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget

AUTOML_FILE = "lightautoml.joblib"
STATE_FILE = "lightautoml.json"
TARGET = "__target__"  # the target column's name in the frame LightAutoML is given
TASKS = {"binary": "binary", "multiclass": "multiclass", "regression": "reg"}
# The suite metric in LightAutoML's names, where it has one for the task; others leave its default.
METRICS = {("binary", "auc"): "auc", ("binary", "logloss"): "logloss",
           ("multiclass", "logloss"): "crossentropy", ("regression", "rmse"): "mse",
           ("regression", "mae"): "mae", ("regression", "r2"): "r2"}
# LightAutoML plans its stages by `timeout` but finishes the fold it is fitting and the blend.
TIME_LIMIT_SHARE = 0.6
TIME_RESERVE_S = 8.0
ENVIRONMENTS = (EnvironmentSpec("0.4.2", requirements=("lightautoml==0.4.2",),
                                imports=("lightautoml.automl.presets.tabular_presets",)),)


def lama_frame(X: pd.DataFrame, schema: FeatureSchema) -> pd.DataFrame:
    """The model's columns as LightAutoML reads them: a category as its level's text (missing stays
    missing), numbers as float, column names as strings."""
    frame = numbers_as_float(schema.apply(X), schema)
    for column in schema.levels:
        frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    frame.columns = [str(column) for column in frame.columns]
    return frame


class LightAutoMLModel(FittedModel):
    def __init__(self, automl: Any, schema: FeatureSchema, task: TaskInfo, model_classes: list[Any]) -> None:
        self.automl = automl
        self.schema = schema
        self.task = task
        self.model_classes = model_classes  # what the target codes 0..k-1 stand for

    def _answer(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.automl.predict(lama_frame(X, self.schema)).data, dtype=float)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return self._answer(X).reshape(-1)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = self._answer(X)
        if matrix.ndim == 1 or matrix.shape[1] == 1:  # binary: the probability of code 1
            positive = matrix.reshape(-1)
            matrix = np.column_stack([1 - positive, positive])
        # The reader's class mapping (code -> column), when it renumbered the codes it was given.
        mapping = getattr(self.automl.reader, "class_mapping", None) or {}
        codes = sorted(range(matrix.shape[1]), key=lambda code: mapping.get(code, code))
        return proba_frame(matrix, [self.model_classes[code] for code in codes], self.task)

    def save(self, model_dir: Path) -> None:
        import joblib

        model_dir.mkdir(parents=True, exist_ok=True)
        joblib.dump(self.automl, model_dir / AUTOML_FILE)
        (model_dir / STATE_FILE).write_text(json.dumps({"classes": self.model_classes}, default=str))
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return max(1, sum(len(level) for level in self.automl.levels))

    def info(self) -> dict[str, Any]:
        return {"models": str(self.automl.create_model_str_desc())[:2000]}


class LightAutoMLAdapter(FrameworkAdapter):
    name = "lightautoml"
    package = "lightautoml"
    install_hint = "automl-eval frameworks install lightautoml@0.4.2 (a suite names it lightautoml@0.4.2)"
    environments = ENVIRONMENTS
    serving_packages = ("lightgbm", "catboost", "torch")

    def start(self, budget: Budget, workdir: Path) -> None:
        import lightautoml.automl.presets.tabular_presets  # noqa: F401 - imports belong to start-up

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
    ) -> LightAutoMLModel:
        from lightautoml.automl.presets.tabular_presets import TabularAutoML
        from lightautoml.tasks import Task

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        model_classes, target = encoded_target(y, task)
        metric = METRICS.get((task.problem_type, task.metric))
        lama_task = Task(TASKS[task.problem_type], **({"metric": metric} if metric else {}))
        options: dict[str, Any] = {
            "timeout": int(search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)),
            "cpu_limit": budget.cores,
            "memory_limit": max(1, budget.memory_mb // 1024),
            "gpu_ids": None,
            "reader_params": {"n_jobs": budget.cores, "random_state": seed},
        }
        automl = TabularAutoML(task=lama_task, **{**options, **framework_params})
        train = lama_frame(X, schema)
        train[TARGET] = target
        automl.fit_predict(train, roles={"target": TARGET}, verbose=0)
        if not getattr(automl, "levels", None):
            raise NoModelTrained(self.name, budget.time_s, len(X))
        return LightAutoMLModel(automl, schema, task, model_classes)

    def load(self, model_dir: Path, task: TaskInfo) -> LightAutoMLModel:
        import joblib

        state = json.loads((model_dir / STATE_FILE).read_text())
        return LightAutoMLModel(joblib.load(model_dir / AUTOML_FILE), FeatureSchema.load(model_dir), task,
                                state["classes"])

    def test_params(self) -> dict[str, Any]:
        return {"general_params": {"use_algos": [["linear_l2"]]}}


ADAPTER = LightAutoMLAdapter()
