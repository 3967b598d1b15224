"""FLAML AutoML: a cost-frugal search over LightGBM, XGBoost, forests and more."""

from __future__ import annotations

import importlib.util
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._onnx import float_matrix, sklearn_graph
from tasks.frameworks._sampling import PARAM as ROWS_PARAM
from tasks.frameworks._sampling import RowCap, Sampled
from tasks.frameworks._tabular import FeatureSchema, proba_frame, search_seconds
from tasks.frameworks.base import FittedModel, FrameworkAdapter, NoModelTrained, TaskInfo, split_params
from tasks.frameworks.capabilities import NotOffered, OnnxGraph, TreeEnsemble, not_offered
from tasks.metric_registry import FLAML, framework_name
from tasks.specs import Budget

AUTOML_FILE = "automl.pkl"  # FLAML's own way to persist a fitted AutoML object
# FLAML stops starting trials at time_budget but finishes the running one and refits the best.
# Measured on a loaded 2-core machine: time_budget 17 s gave a 26 s fit.
TIME_BUDGET_SHARE = 0.85
TIME_RESERVE_S = 8.0
# FLAML's own default list without CatBoost: FLAML cannot stop a running trial, and one CatBoost
# trial (cross-validated, thousands of rounds on one core) ran past the job's hard limit on a
# 344-row dataset. A suite can still ask for it with `estimator_list`.
ESTIMATORS = ["lgbm", "xgboost", "xgb_limitdepth", "rf", "extra_tree"]
TREE_ESTIMATORS = ("lgbm", "xgboost", "xgb_limitdepth", "rf", "extra_tree")  # shap reads their trees
BOOSTERS = ("lgbm", "xgboost", "xgb_limitdepth")  # converted by onnxmltools, the rest by skl2onnx
# FLAML samples rows for its own trials (`sample`), but its preprocessing, holdout split and
# first trials all run on every row it is given: at 9 M rows x 19 columns under 1m2c it trained
# nothing in its 51 s. So it is fitted on at most this many cells (rows x columns) per core and
# minute of the budget's time_s (about 670,000 rows of 30 columns at 1m2c) ...
CELLS_PER_CORE_MINUTE = 10_000_000
# ... and on as many rows as fit the budget's memory_mb, its peak being about this many times the
# in-memory size of the rows it is given (its transformer and holdout split copy them).
PEAK_MEMORY_PER_DATA = 6
ROW_CAP = RowCap("flaml", CELLS_PER_CORE_MINUTE, PEAK_MEMORY_PER_DATA)


class FlamlModel(FittedModel):
    def __init__(self, automl: Any, schema: FeatureSchema, task: TaskInfo,
                 sampled: Sampled | None = None) -> None:
        self.automl = automl
        self.schema = schema
        self.task = task
        self.sampled = sampled  # when fitted on a sample

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.automl.predict(self.schema.apply(X)))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = self.automl.predict_proba(self.schema.apply(X))
        return proba_frame(np.asarray(matrix), list(self.automl.classes_), self.task)

    def _prepare(self, X: pd.DataFrame) -> Any:
        """X as FLAML's final estimator reads it: FLAML keeps its preprocessing on its wrappers."""
        automl = self.automl
        prepared = automl._state.task.preprocess(self.schema.apply(X), automl._transformer)
        return automl._trained_estimator._preprocess(prepared)

    def tree_ensemble(self) -> TreeEnsemble:
        best = self.automl.best_estimator
        if best not in TREE_ESTIMATORS:
            raise NotOffered(f"FLAML picked '{best}', not a tree ensemble")
        if self.schema.levels:
            raise NotOffered("FLAML's model sees categorical features through its own encoding")
        estimator = self.automl._trained_estimator.estimator
        names = getattr(estimator, "feature_names_in_", None)
        columns = [str(c) for c in (self.schema.columns if names is None else names)]
        return TreeEnsemble(estimator, self._prepare, columns)

    def to_onnx(self, folder: Path) -> OnnxGraph:
        automl, task = self.automl, self.task
        best = automl.best_estimator
        estimator = automl._trained_estimator.estimator
        if self.schema.levels:
            raise NotOffered(f"FLAML's {best} reads categorical features through its own encoding, which "
                             "the converters here do not take")
        covers = f"FLAML's final {best} model (FLAML's column preprocessing stays in Python)"
        classes = list(automl.classes_) if task.is_classification else []
        if best not in BOOSTERS:
            converted = sklearn_graph(estimator, self.schema, task, covers=covers,
                                      prepare=lambda X: pd.DataFrame(self._prepare(X)))
            # FLAML fits its scikit-learn models on encoded labels; its classes_ are the labels, in order.
            converted.classes = classes
            return converted
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        inputs = [("X", FloatTensorType([None, len(self.schema.columns)]))]
        try:
            # onnxmltools picks the highest opset it supports (15 for LightGBM in 1.16).
            if best == "lgbm":
                graph = onnxmltools.convert_lightgbm(estimator, initial_types=inputs, zipmap=False)
            else:
                graph = onnxmltools.convert_xgboost(estimator, initial_types=inputs)
        except Exception as exc:  # noqa: BLE001 - the converter's verdict on this model
            raise not_offered(exc) from None

        def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            return {"X": float_matrix(pd.DataFrame(self._prepare(X)))}

        return OnnxGraph(graph, feed, 1 if task.is_classification else 0, classes, covers)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        with open(model_dir / AUTOML_FILE, "wb") as handle:
            pickle.dump(self.automl, handle, pickle.HIGHEST_PROTOCOL)
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return max(1, len(self.automl.config_history))  # trials FLAML evaluated

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def info(self) -> dict[str, Any]:
        recorded: dict[str, Any] = {
            "best_estimator": self.automl.best_estimator,
            "best_config": self.automl.best_config,
            "trials": len(self.automl.config_history),
        }
        if self.sampled:
            recorded["sampled"] = self.sampled.sentence()
        return recorded


class FlamlAdapter(FrameworkAdapter):
    name = "flaml"
    metric_names = FLAML  # the suite metric in its own names, from tasks/metric_registry.py
    package = "flaml"
    install_hint = "pip install 'flaml[automl]' xgboost-cpu"
    serving_packages = ("lightgbm", "xgboost", "xgboost-cpu", "catboost")

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason is None and importlib.util.find_spec("xgboost") is None:
            # flaml.automl imports xgboost at import time even when it is not searched.
            return f"FLAML's AutoML needs XGBoost, which is missing; install it with: {self.install_hint}"
        return reason

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, _ = split_params(params)
        ROW_CAP.check(adapter_params.get(ROWS_PARAM))

    def start(self, budget: Budget, workdir: Path) -> None:
        import flaml  # noqa: F401 - a few seconds of imports belong to start-up, not to the search

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
    ) -> FlamlModel:
        from flaml import AutoML

        adapter_params, fit_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        X, y, sampled = ROW_CAP.sample(X, y, budget, adapter_params, seed, stratify=task.is_classification)
        automl = AutoML()
        options: dict[str, Any] = {
            "task": "classification" if task.is_classification else "regression",
            "estimator_list": ESTIMATORS + (["lrl1"] if task.is_classification else []),
            "metric": framework_name(task.metric, FLAML),
            "time_budget": search_seconds(budget.time_s, TIME_BUDGET_SHARE, TIME_RESERVE_S),
            "n_jobs": budget.cores,
            "seed": seed,
            # Refit the best config on all the data only if that fits in the budget.
            "retrain_full": "budget",
            "verbose": 0,
            "log_file_name": str(workdir / "flaml.log"),
        }
        automl.fit(X_train=schema.apply(X), y_train=y, **{**options, **fit_params})
        if automl.best_estimator is None or automl.model is None:
            # FLAML only warns ("No estimator is trained") and its predict then answers None.
            raise NoModelTrained(self.name, budget.time_s, len(X))
        return FlamlModel(automl, schema, task, sampled)

    def load(self, model_dir: Path, task: TaskInfo) -> FlamlModel:
        with open(model_dir / AUTOML_FILE, "rb") as handle:
            automl = pickle.load(handle)  # noqa: S301 - our own model folder
        return FlamlModel(automl, FeatureSchema.load(model_dir), task)

    def test_params(self) -> dict[str, Any]:
        return {"estimator_list": ["lgbm"], "max_iter": 3}


ADAPTER = FlamlAdapter()
