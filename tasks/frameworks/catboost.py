"""CatBoost: oblivious gradient-boosted trees, its own defaults, boosting until its iterations are
done or the budget's time is spent.

Categorical columns go in as the codes of the levels fixed at fit time (a missing or unknown level
is the code -1, a level of its own) and are declared categorical: CatBoost turns them into its
ordered target statistics itself, with no encoding by the adapter. shap's tree explainer reads the
model (it hands CatBoost the same columns). Classes are encoded in the task's fixed order; a class
absent from the training fold gets probability 0.

ONNX is CatBoost's own export, offered for a model of numeric features only: the export refuses
models with categorical features ("does not support categorical features"), which this adapter keeps
native. Not used: the GPU, because CatBoost refuses user callbacks there, and the callback is what
stops the fit within the budget.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._booster import BoosterModel
from tasks.frameworks._tabular import FeatureSchema, encoded_target, numbers_as_float, search_seconds
from tasks.frameworks.base import FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import NativeImportance, NotOffered, OnnxGraph, TreeEnsemble
from tasks.specs import Budget

MODEL_FILE = "catboost.cbm"  # CatBoost's own binary format
STATE_FILE = "catboost.json"  # the classes the model's outputs stand for, and how it was fitted
ONNX_FILE = "catboost.onnx"  # CatBoost's own ONNX export, read back from a scratch folder
# Boosting stops after the iteration in which the fit's time ran out: keep one and saving in reserve.
TIME_LIMIT_SHARE = 0.95
TIME_RESERVE_S = 2.0
# CatBoost's own RAM limit covers its target statistics only (its docs): give it half the budget's
# memory, the rest being the data, the trees and the worker.
RAM_LIMIT_SHARE = 0.5


def catboost_frame(X: pd.DataFrame, schema: FeatureSchema) -> pd.DataFrame:
    """The model's columns as CatBoost reads them: numbers as float, categories as the integer code of
    their fixed level (-1 for a missing or unknown one). The numeric columns are shared, not copied."""
    frame = numbers_as_float(schema.apply(X), schema)
    for column in schema.levels:
        frame[column] = frame[column].cat.codes.astype(np.int32)
    return frame


class CatBoostModel(BoosterModel):
    model_file = MODEL_FILE
    state_file = STATE_FILE
    native_importance_kind = "catboost PredictionValuesChange"

    def _input(self, X: pd.DataFrame) -> Any:
        return catboost_frame(X, self.schema)

    def _probabilities(self, matrix: Any) -> np.ndarray:
        return self.booster.predict_proba(matrix)

    def _values(self, matrix: Any) -> np.ndarray:
        return self.booster.predict(matrix)

    def _write_booster(self, path: Path) -> None:
        self.booster.save_model(str(path))

    # ------------------------------------------------------------ capabilities

    def tree_ensemble(self) -> TreeEnsemble:
        return TreeEnsemble(self.booster, self._input, list(self.schema.columns))

    def to_onnx(self, folder: Path) -> OnnxGraph:
        if self.schema.levels:
            raise NotOffered("CatBoost's ONNX export does not support categorical features, which this "
                             "adapter keeps native")
        import onnx

        # CatBoost writes its export to a file only; read back, it is the evaluation's to save.
        with tempfile.TemporaryDirectory() as scratch:
            path = Path(scratch) / ONNX_FILE
            self.booster.save_model(str(path), format="onnx")
            graph = onnx.load(str(path))
        classification = self.task.is_classification
        if classification:
            _probabilities_as_tensor(graph, len(self.model_classes))
        # Classifiers answer (label, probabilities), regressors (values).
        return OnnxGraph(graph, lambda X: {"features": self._input(X).to_numpy(dtype=np.float32)},
                         1 if classification else 0, list(self.model_classes) if classification else [],
                         "the whole model (numeric features only)")

    def native_importance(self, X: pd.DataFrame, y: pd.Series, time_limit_s: float) -> NativeImportance:
        # How much each feature moves the predictions, read from the trees: X and y are not needed.
        values = np.asarray(self.booster.get_feature_importance(), dtype=float)
        table = pd.DataFrame({"feature": list(self.schema.columns), "importance": values})
        return NativeImportance(self.native_importance_kind or "", table)


def _probabilities_as_tensor(graph: Any, classes: int) -> None:
    """Make a CatBoost classifier graph answer its probabilities as a tensor, one column per class:
    its export ends in a ZipMap (one dict per row), which is dropped, its input becoming the output."""
    import onnx

    zipmap = next(node for node in graph.graph.node if node.op_type == "ZipMap")
    graph.graph.node.remove(zipmap)
    output = next(value for value in graph.graph.output if value.name == zipmap.output[0])
    tensor = onnx.helper.make_tensor_value_info(zipmap.input[0], onnx.TensorProto.FLOAT, [None, classes])
    graph.graph.output.insert(list(graph.graph.output).index(output), tensor)
    graph.graph.output.remove(output)


class CatBoostAdapter(FrameworkAdapter):
    name = "catboost"
    package = "catboost"
    install_hint = "pip install catboost"
    fixed_work = True  # `iterations` trees, unless the budget's time runs out first

    def start(self, budget: Budget, workdir: Path) -> None:
        import catboost  # noqa: F401 - its imports belong to start-up, not to the search

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
    ) -> CatBoostModel:
        import catboost

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        frame = catboost_frame(X, schema)
        limit_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        stop = _StopAtTimeLimit(limit_s)
        options: dict[str, Any] = {
            "thread_count": budget.cores, "random_seed": seed, "verbose": False,
            "allow_writing_files": False, "used_ram_limit": f"{int(budget.memory_mb * RAM_LIMIT_SHARE)}mb",
            "cat_features": [column for column in schema.columns if column in schema.levels],
        }
        model_classes, target = encoded_target(y, task)
        classifier = task.is_classification
        estimator_class = catboost.CatBoostClassifier if classifier else catboost.CatBoostRegressor
        estimator = estimator_class(**{**options, **framework_params})
        estimator.fit(frame, target, callbacks=[stop])
        details = {"boosting_rounds": int(estimator.tree_count_),
                   "max_rounds": int(estimator.get_params().get("iterations") or 1000),
                   "stopped_by_time": stop.stopped, "time_limit_s": round(limit_s, 1),
                   "categorical_features": options["cat_features"]}
        return CatBoostModel(estimator, schema, task, model_classes, details)

    def load(self, model_dir: Path, task: TaskInfo) -> CatBoostModel:
        import catboost

        estimator = catboost.CatBoostClassifier() if task.is_classification else catboost.CatBoostRegressor()
        estimator.load_model(str(model_dir / MODEL_FILE))
        return CatBoostModel.loaded(estimator, model_dir, task)

    def test_params(self) -> dict[str, Any]:
        return {"iterations": 10}


class _StopAtTimeLimit:
    """A CatBoost callback that ends boosting after the iteration in which `seconds` ran out."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.started = time.monotonic()
        self.stopped = False

    def after_iteration(self, info: Any) -> bool:
        self.stopped = time.monotonic() - self.started > self.seconds
        return not self.stopped  # CatBoost goes on while this is True


ADAPTER = CatBoostAdapter()
