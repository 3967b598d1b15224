"""LightGBM: gradient-boosted trees grown leaf-wise on histograms, its own defaults, boosting until
its rounds are done or the budget's time is spent.

Categorical columns go in as the codes of the levels fixed at fit time and are declared categorical,
so LightGBM splits them natively (a level set per split) without one-hot or ordinal encoding; a
missing or unknown level is missing. shap's tree explainer reads those splits, and onnxmltools
converts them (the conformance test holds it to parity). Classes are encoded in the task's fixed
order; a class absent from the training fold gets probability 0.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._booster import BoosterModel
from tasks.frameworks._tabular import FeatureSchema, code_matrix, encoded_target, search_seconds
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import NativeImportance, OnnxGraph, TreeEnsemble
from tasks.specs import Budget

MODEL_FILE = "lightgbm.txt"  # LightGBM's own text format, readable by any of its versions since 4.0
STATE_FILE = "lightgbm.json"  # the classes the booster's outputs stand for, and how it was fitted
# Boosting stops after the round in which the fit's time ran out: keep a round and saving in reserve.
TIME_LIMIT_SHARE = 0.95
TIME_RESERVE_S = 2.0


class LightGBMModel(BoosterModel):
    model_file = MODEL_FILE
    state_file = STATE_FILE
    native_importance_kind = "lightgbm gain"

    def _probabilities(self, matrix: np.ndarray) -> np.ndarray:
        raw = np.asarray(self.booster.predict(matrix), dtype=float)
        return np.column_stack([1 - raw, raw]) if raw.ndim == 1 else raw  # binary: the second class's

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
        # A converter error is a failure of the export, reported as such, never "not offered".
        graph = onnxmltools.convert_lightgbm(self.booster, initial_types=inputs, zipmap=False)
        return self.booster_graph(graph)

    def native_importance(self, X: pd.DataFrame, y: pd.Series, time_limit_s: float) -> NativeImportance:
        # Total gain of the splits on each feature: read from the trees, so X and y are not needed.
        gains = self.booster.feature_importance(importance_type="gain")
        table = pd.DataFrame({"feature": list(self.schema.columns), "importance": np.asarray(gains, float)})
        return NativeImportance(self.native_importance_kind or "", table)


class LightGBMAdapter(FrameworkAdapter):
    name = "lightgbm"
    package = "lightgbm"
    install_hint = "pip install lightgbm"
    fixed_work = True  # n_estimators rounds, unless the budget's time runs out first

    def start(self, budget: Budget, workdir: Path) -> None:
        import lightgbm  # noqa: F401 - its imports belong to start-up, not to the search

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
    ) -> LightGBMModel:
        import lightgbm

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        matrix = code_matrix(schema.apply(X), schema)
        limit_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        stop = _StopAtTimeLimit(lightgbm, limit_s)
        categorical = [index for index, column in enumerate(schema.columns) if column in schema.levels]
        options: dict[str, Any] = {"n_jobs": budget.cores, "random_state": seed, "verbose": -1}
        model_classes, target = encoded_target(y, task)
        estimator_class = lightgbm.LGBMClassifier if task.is_classification else lightgbm.LGBMRegressor
        estimator = estimator_class(**{**options, **framework_params})
        estimator.fit(matrix, target, categorical_feature=categorical or "auto", callbacks=[stop])
        booster = _float32_thresholds(lightgbm, estimator.booster_)
        details = {"boosting_rounds": int(booster.current_iteration()),
                   "max_rounds": int(estimator.get_params().get("n_estimators") or 100),
                   "stopped_by_time": stop.stopped, "time_limit_s": round(limit_s, 1),
                   "categorical_features": [schema.columns[index] for index in categorical]}
        return LightGBMModel(booster, schema, task, model_classes, details)

    def load(self, model_dir: Path, task: TaskInfo) -> LightGBMModel:
        import lightgbm

        booster = lightgbm.Booster(model_file=str(model_dir / MODEL_FILE))
        return LightGBMModel.loaded(booster, model_dir, task)

    def test_params(self) -> dict[str, Any]:
        return {"n_estimators": 10}


def _float32_thresholds(lightgbm: Any, booster: Any) -> Any:
    """The booster with each numeric split's threshold t replaced by the largest float32 <= t.

    LightGBM compares its float32 input against double thresholds, ONNX against float32 ones: a
    value between the two roundings goes left in one and right in the other (a gap of 1.3e-4 in
    probabilities on breast_cancer). For a float32 x, x <= t exactly when x <= that float32, so the
    booster answers the adapter's float32 input as before and its ONNX graph answers alike.
    Category splits (decision_type bit 0) hold an index, kept as it is."""
    # The tree sizes in the header count characters; LightGBM reads the trees without them.
    lines = [line for line in booster.model_to_string().splitlines() if not line.startswith("tree_sizes=")]
    thresholds_at = None
    for index, line in enumerate(lines):
        if line.startswith("threshold="):  # a tree's thresholds come before its decision types
            thresholds_at = index
        elif line.startswith("decision_type=") and thresholds_at is not None:
            kinds = [int(value) for value in line.split("=", 1)[1].split()]
            values = lines[thresholds_at].split("=", 1)[1].split()
            lowered = [value if kind & 1 else repr(_float32_at_most(float(value)))
                       for kind, value in zip(kinds, values, strict=True)]
            lines[thresholds_at] = "threshold=" + " ".join(lowered)
            thresholds_at = None
    return lightgbm.Booster(model_str="\n".join(lines) + "\n")


def _float32_at_most(value: float) -> float:
    rounded = np.float32(value)
    if float(rounded) > value:
        rounded = np.nextafter(rounded, np.float32(-np.inf))
    return float(rounded)


class _StopAtTimeLimit:
    """A LightGBM callback that ends boosting after the round in which `seconds` ran out; the rounds
    done are kept (the booster's best iteration is the last one)."""

    order = 100  # after LightGBM's own callbacks (logging, early stopping)

    def __init__(self, lightgbm: Any, seconds: float) -> None:
        self.lightgbm = lightgbm
        self.seconds = seconds
        self.started = time.monotonic()
        self.stopped = False

    def __call__(self, env: Any) -> None:
        if time.monotonic() - self.started > self.seconds:
            self.stopped = True
            raise self.lightgbm.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])


ADAPTER = LightGBMAdapter()
