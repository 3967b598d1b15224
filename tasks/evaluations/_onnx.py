"""Converters from a saved model to ONNX, one per framework, and how a frame feeds the ONNX graph.

skl2onnx for the scikit-learn baselines and the scikit-learn models FLAML may pick, onnxmltools
for FLAML's LightGBM/XGBoost, onnxmltools' H2O route for GBM MOJOs, a hand-built graph for the
constant baseline. A model a converter cannot take raises `Unsupported` with the converter's own
message; AutoGluon's compile() and H2O's MOJO are handled in export.py (they are not one graph).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

TARGET_OPSET = {"": 17, "ai.onnx.ml": 3}


class Unsupported(Exception):
    """The converter does not take this model; the message is the converter's (first line)."""


@dataclass
class OnnxModel:
    model: Any  # onnx.ModelProto
    feed: Callable[[pd.DataFrame], dict[str, np.ndarray]]  # a test frame -> the graph's inputs
    # Output index of the probabilities (classification) or values (regression).
    output: int
    classes: list[Any]  # the graph's class order (classification)
    covers: str  # what the graph covers, in words


def _unsupported(exc: Exception) -> Unsupported:
    text = f"{type(exc).__name__}: {exc}".strip()
    return Unsupported(text.splitlines()[0][:400] if text else type(exc).__name__)


def convert(model: Any, framework: str, X: pd.DataFrame, task: Any) -> OnnxModel:
    """The ONNX graph of a saved model (raises Unsupported)."""
    if framework == "constant":
        return _constant(model, X, task)
    if framework in ("hgb", "rf", "tfidf_logreg"):
        return _sklearn(model.estimator, model.schema, task, covers="the whole fitted estimator")
    if framework == "flaml":
        return _flaml(model, task)
    raise Unsupported(f"no ONNX converter for framework '{framework}' here")


def float_matrix(frame: pd.DataFrame) -> np.ndarray:
    return frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float32)


def _sklearn(estimator: Any, schema: Any, task: Any, *, covers: str,
             prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> OnnxModel:
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType, StringTensorType

    columns = list(schema.columns)
    apply = prepare or schema.apply
    options = {id(estimator): {"zipmap": False}} if task.is_classification else None
    if schema.levels and prepare is None:
        # Mixed columns: one input per column, strings for the categorical ones (the encoder's input).
        inputs = [(c, StringTensorType([None, 1]) if c in schema.levels else FloatTensorType([None, 1]))
                  for c in columns]

        def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            frame = apply(X)
            return {c: (frame[c].astype(object).where(frame[c].notna(), "").astype(str).to_numpy()
                        if c in schema.levels else pd.to_numeric(frame[c], errors="coerce").to_numpy(
                            dtype=np.float32)).reshape(-1, 1) for c in columns}
    else:
        inputs = [("X", FloatTensorType([None, len(columns)]))]

        def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            return {"X": float_matrix(apply(X))}
    try:
        graph = convert_sklearn(estimator, initial_types=inputs, options=options, target_opset=TARGET_OPSET)
    except Exception as exc:  # noqa: BLE001 - any converter failure is its verdict on this model
        raise _unsupported(exc) from None
    classes = list(getattr(estimator, "classes_", []))
    return OnnxModel(graph, feed, 1 if task.is_classification else 0, classes, covers)


def _flaml(model: Any, task: Any) -> OnnxModel:
    automl = model.automl
    best = automl.best_estimator
    trained = automl._trained_estimator  # FLAML keeps its preprocessing on the wrapper
    estimator = trained.estimator

    def prepare(X: pd.DataFrame) -> pd.DataFrame:
        prepared = automl._state.task.preprocess(model.schema.apply(X), automl._transformer)
        return trained._preprocess(prepared)

    if model.schema.levels:
        raise Unsupported(f"FLAML's {best} reads categorical features through its own encoding, which the "
                          "converters here do not take")
    covers = f"FLAML's final {best} model (FLAML's column preprocessing stays in Python)"
    if best in ("lgbm", "xgboost", "xgb_limitdepth"):
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        width = len(model.schema.columns)
        inputs = [("X", FloatTensorType([None, width]))]
        try:
            # onnxmltools picks the highest opset it supports (15 for LightGBM in 1.16).
            if best == "lgbm":
                graph = onnxmltools.convert_lightgbm(estimator, initial_types=inputs, zipmap=False)
            else:
                graph = onnxmltools.convert_xgboost(estimator, initial_types=inputs)
        except Exception as exc:  # noqa: BLE001
            raise _unsupported(exc) from None

        def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            return {"X": float_matrix(pd.DataFrame(prepare(X)))}

        classes = list(automl.classes_) if task.is_classification else []
        return OnnxModel(graph, feed, 1 if task.is_classification else 0, classes, covers)
    converted = _sklearn(estimator, model.schema, task, covers=covers,
                         prepare=lambda X: pd.DataFrame(prepare(X)))
    # FLAML fits its scikit-learn models on encoded labels; its own classes_ are the labels, in that order.
    converted.classes = list(automl.classes_) if task.is_classification else []
    return converted


def _constant(model: Any, X: pd.DataFrame, task: Any) -> OnnxModel:
    """A graph that reads the row count of its input and repeats the training prior (or mean)."""
    import onnx
    from onnx import TensorProto, helper

    if task.is_classification:
        row = [model.priors.get(str(label), 0.0) for label in task.classes]
    else:
        row = [model.mean]
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

    return OnnxModel(proto, feed, 0, list(task.classes), "the whole model (it reads no feature)")
