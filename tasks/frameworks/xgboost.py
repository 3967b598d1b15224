"""XGBoost: gradient-boosted trees (hist), its own defaults, boosting until its rounds are done or
the budget's time is spent, on the GPU (`device="cuda"`) when the job holds one.

Categorical columns go in as the codes of the levels fixed at fit time (a missing or unknown level
is missing), so the fitted booster has numeric splits only: shap's tree explainer reads it and
onnxmltools converts it, and missing values are routed by XGBoost's own learned default directions.
Classes are encoded in the task's fixed order; a class absent from the training fold gets
probability 0.
"""

from __future__ import annotations

import os
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._booster import BoosterModel
from tasks.frameworks._tabular import FeatureSchema, code_matrix, encoded_target, search_seconds
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import OnnxGraph, TreeEnsemble
from tasks.specs import Budget

MODEL_FILE = "xgboost.ubj"  # XGBoost's own format: portable across its versions and machines
STATE_FILE = "xgboost.json"  # the classes the booster's outputs stand for, and how it was fitted
# Boosting stops after the round in which the fit's time ran out: keep a round and saving in reserve.
TIME_LIMIT_SHARE = 0.95
TIME_RESERVE_S = 2.0
DISTRIBUTIONS = ("xgboost", "xgboost-cpu")  # the CUDA build and the CPU-only one; either provides it


def _distribution() -> str:
    """Which of XGBoost's distributions is installed (its version and pin are that one's)."""
    for name in DISTRIBUTIONS:
        try:
            metadata.version(name)
            return name
        except metadata.PackageNotFoundError:
            continue
    return DISTRIBUTIONS[-1]


def _device(budget: Budget) -> tuple[str, str]:
    """("cuda" | "cpu", why the CPU when the budget grants a GPU). The job's CUDA_VISIBLE_DEVICES
    holds exactly the devices it was granted."""
    import xgboost

    if budget.gpus <= 0:
        return "cpu", ""
    if not os.environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        return "cpu", "the budget grants a GPU but none is visible to the job"
    if not xgboost.build_info().get("USE_CUDA"):
        return "cpu", (f"this XGBoost build ({_distribution()}) has no CUDA; install the `xgboost` wheel "
                       "to train on the GPU")
    return "cuda", ""


class XGBoostModel(BoosterModel):
    model_file = MODEL_FILE
    state_file = STATE_FILE

    def _probabilities(self, matrix: np.ndarray) -> np.ndarray:
        return self.booster.predict_proba(matrix)

    def _values(self, matrix: np.ndarray) -> np.ndarray:
        return self.booster.predict(matrix)

    def _write_booster(self, path: Path) -> None:
        self.booster.save_model(path)

    # ------------------------------------------------------------ capabilities

    def tree_ensemble(self) -> TreeEnsemble:
        return TreeEnsemble(self.booster, self._input, list(self.schema.columns))

    def to_onnx(self, folder: Path) -> OnnxGraph:
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        inputs = [("X", FloatTensorType([None, len(self.schema.columns)]))]
        # Every booster this adapter fits is one onnxmltools converts: a converter error is a failure
        # of the export, reported as such, never "not offered".
        return self.booster_graph(onnxmltools.convert_xgboost(self.booster, initial_types=inputs))


class XGBoostAdapter(FrameworkAdapter):
    name = "xgboost"
    package = _distribution()
    install_hint = "pip install xgboost-cpu (or xgboost, the build with CUDA, for GPUs)"
    uses_gpu = True
    fixed_work = True  # n_estimators rounds, unless the budget's time runs out first


    def start(self, budget: Budget, workdir: Path) -> None:
        import xgboost  # noqa: F401 - its imports belong to start-up, not to the search

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
    ) -> XGBoostModel:
        import xgboost

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        matrix = code_matrix(schema.apply(X), schema)
        device, device_note = _device(budget)
        limit_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        stop = _stop_at_time_limit(xgboost, limit_s)
        options: dict[str, Any] = {"tree_method": "hist", "device": device, "n_jobs": budget.cores,
                                   "random_state": seed, "callbacks": [stop]}
        model_classes, target = encoded_target(y, task)
        estimator_class = xgboost.XGBClassifier if task.is_classification else xgboost.XGBRegressor
        estimator = estimator_class(**{**options, **framework_params})
        estimator.fit(matrix, target)
        # Predict on the CPU whatever it trained on: the harness's data is in host memory, and the
        # saved model then loads and serves on machines without a GPU.
        estimator.set_params(callbacks=None, device="cpu")
        details = {"device": device, "boosting_rounds": int(estimator.get_booster().num_boosted_rounds()),
                   "max_rounds": int(estimator.get_params().get("n_estimators") or 100),
                   "stopped_by_time": stop.stopped, "time_limit_s": round(limit_s, 1)}
        if device_note:
            details["device_reason"] = device_note
        return XGBoostModel(estimator, schema, task, model_classes, details)

    def load(self, model_dir: Path, task: TaskInfo) -> XGBoostModel:
        import xgboost

        estimator = xgboost.XGBClassifier() if task.is_classification else xgboost.XGBRegressor()
        estimator.load_model(model_dir / MODEL_FILE)
        return XGBoostModel.loaded(estimator, model_dir, task)

    def test_params(self) -> dict[str, Any]:
        return {"n_estimators": 10}


def _stop_at_time_limit(xgboost: Any, seconds: float) -> Any:
    """An XGBoost callback that ends boosting after the round in which `seconds` ran out."""

    class StopAtTimeLimit(xgboost.callback.TrainingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.started = time.monotonic()
            self.stopped = False

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            self.stopped = time.monotonic() - self.started > seconds
            return self.stopped

    return StopAtTimeLimit()


ADAPTER = XGBoostAdapter()
