"""Constant baseline: the training prior class probabilities, or the training mean."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._onnx import TARGET_OPSET
from tasks.frameworks._tabular import labels_from_proba
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.frameworks.capabilities import OnnxGraph
from tasks.specs import Budget, DatasetSpec

STATE_FILE = "constant.json"


class ConstantModel(FittedModel):
    def __init__(self, task: TaskInfo, priors: dict[str, float] | None, mean: float | None) -> None:
        self.task = task
        self.priors = priors  # class label text -> probability (classification)
        self.mean = mean  # training mean (regression)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if self.priors is None:
            raise NotImplementedError("regression models have no class probabilities")
        row = [self.priors.get(str(label), 0.0) for label in self.task.classes]
        return pd.DataFrame(np.tile(row, (len(X), 1)), columns=list(self.task.classes))

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.priors is None:
            return np.full(len(X), self.mean, dtype=float)
        return labels_from_proba(self.predict_proba(X))

    def to_onnx(self, folder: Path) -> OnnxGraph:
        """A graph that reads the row count of its input and repeats the training prior (or mean)."""
        import onnx
        from onnx import TensorProto, helper

        if self.priors is not None:
            row = [self.priors.get(str(label), 0.0) for label in self.task.classes]
        else:
            assert self.mean is not None  # a model without priors is a regression's, which keeps its mean
            row = [self.mean]
        width = len(row)
        nodes = [
            helper.make_node("Shape", ["X"], ["shape"]),
            helper.make_node("Slice", ["shape", "zero", "one"], ["rows"]),
            helper.make_node("Concat", ["rows", "width"], ["out_shape"], axis=0),
            helper.make_node("Expand", ["prior", "out_shape"], ["output"]),
        ]
        initializers = [
            helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
            helper.make_tensor("one", TensorProto.INT64, [1], [1]),
            helper.make_tensor("width", TensorProto.INT64, [1], [width]),
            helper.make_tensor("prior", TensorProto.FLOAT, [1, width], row),
        ]
        graph = helper.make_graph(
            nodes, "constant_baseline",
            [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, None])],
            [helper.make_tensor_value_info("output", TensorProto.FLOAT, [None, width])],
            initializers,
        )
        proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", TARGET_OPSET[""])])
        onnx.checker.check_model(proto)

        def feed(frame: pd.DataFrame) -> dict[str, np.ndarray]:
            # The constant baseline reads no feature: one column of zeros carries the row count.
            return {"X": np.zeros((len(frame), 1), dtype=np.float32)}

        return OnnxGraph(proto, feed, 0, list(self.task.classes), "the whole model (it reads no feature)")

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        (model_dir / STATE_FILE).write_text(json.dumps({"priors": self.priors, "mean": self.mean}))


class ConstantAdapter(FrameworkAdapter):
    name = "constant"
    package = "scikit-learn"  # nothing of its own; the version shown is the project's scientific stack
    install_hint = "pip install scikit-learn"
    # It reads no feature at all, so it is the baseline of every kind of dataset: the shipped
    # modalities are named here, and `applies_to` takes any other a plug-in adds.
    modalities = frozenset({"tabular", "multimodal", "text", "image"})

    def applies_to(self, spec: DatasetSpec) -> str | None:
        if spec.problem_type not in self.problem_types:
            return f"{self.name} does not handle {spec.modality} {spec.problem_type} problems."
        return None

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
    ) -> ConstantModel:
        if task.is_classification:
            shares = y.astype(str).value_counts(normalize=True)
            return ConstantModel(task, {str(k): float(v) for k, v in shares.items()}, None)
        return ConstantModel(task, None, float(pd.to_numeric(y).mean()))

    def load(self, model_dir: Path, task: TaskInfo) -> ConstantModel:
        state = json.loads((model_dir / STATE_FILE).read_text())
        return ConstantModel(task, state["priors"], state["mean"])


ADAPTER = ConstantAdapter()
