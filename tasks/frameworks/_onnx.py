"""ONNX conversions the adapters' models share: skl2onnx for scikit-learn estimators, and how a
frame feeds the graph. A model a converter cannot take raises NotOffered with the converter's own
message (its first line)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.base import TaskInfo
from tasks.frameworks.capabilities import OnnxGraph, not_offered

TARGET_OPSET = {"": 17, "ai.onnx.ml": 3}


def float_matrix(frame: pd.DataFrame) -> np.ndarray:
    return frame.apply(pd.to_numeric, errors="coerce").to_numpy(dtype=np.float32)


def sklearn_graph(estimator: Any, schema: Any, task: TaskInfo, *, covers: str,
                  prepare: Callable[[pd.DataFrame], pd.DataFrame] | None = None) -> OnnxGraph:
    """A scikit-learn estimator through skl2onnx. `schema` (a FeatureSchema) types the input;
    `prepare` replaces schema.apply when the estimator reads a frame prepared otherwise."""
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
        raise not_offered(exc) from None
    classes = list(getattr(estimator, "classes_", []))
    return OnnxGraph(graph, feed, 1 if task.is_classification else 0, classes, covers)
