"""What the gradient-boosting adapters' models share (xgboost, lightgbm, catboost): one booster fed a
float matrix of the schema's columns (categories as their fixed levels' codes), its outputs standing
for the classes the training fold held, its own model file beside a small JSON state, and its ONNX
graph fed the same matrix."""

from __future__ import annotations

import json
from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Self

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import FeatureSchema, code_matrix, labels_from_proba, proba_frame
from tasks.frameworks.base import FittedModel, TaskInfo
from tasks.frameworks.capabilities import OnnxGraph


class BoosterModel(FittedModel):
    """A fitted booster, the schema that types its input, and how its fit went (`details`)."""

    # The booster's own file and the state written beside it, in the model folder.
    model_file: ClassVar[str]
    state_file: ClassVar[str]

    def __init__(self, booster: Any, schema: FeatureSchema, task: TaskInfo, model_classes: list[Any],
                 details: dict[str, Any]) -> None:
        self.booster = booster
        self.schema = schema
        self.task = task
        self.model_classes = model_classes  # labels of the booster's outputs 0..k-1 (classification)
        self.details = details

    @abstractmethod
    def _probabilities(self, matrix: Any) -> np.ndarray:
        """One column per model class, for the booster's input `matrix` (classification)."""

    @abstractmethod
    def _values(self, matrix: Any) -> np.ndarray:
        """One value per row of the booster's input `matrix` (regression)."""

    @abstractmethod
    def _write_booster(self, path: Path) -> None:
        """Write the booster in its framework's own format to `path`."""

    def _input(self, X: pd.DataFrame) -> Any:
        """The booster's input for X: a float matrix of codes unless the framework reads a frame."""
        return code_matrix(self.schema.apply(X), self.schema)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return np.asarray(self._values(self._input(X)), dtype=float).reshape(-1)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = np.asarray(self._probabilities(self._input(X)), dtype=float)
        return proba_frame(matrix, self.model_classes, self.task)

    def predict_with_proba(self, X: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
        # predict() is the most probable class of predict_proba(): one pass through the booster, not two.
        proba = self.predict_proba(X)
        return labels_from_proba(proba), proba

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        self._write_booster(model_dir / self.model_file)
        self.schema.save(model_dir)
        state = {"model_classes": [str(c) for c in self.model_classes], "details": self.details}
        (model_dir / self.state_file).write_text(json.dumps(state, indent=2, default=str))

    @classmethod
    def loaded(cls, booster: Any, model_dir: Path, task: TaskInfo) -> Self:
        """The model save() wrote to `model_dir`, around its `booster` as the framework loaded it."""
        state = json.loads((model_dir / cls.state_file).read_text())
        by_text = {str(label): label for label in task.classes}
        model_classes = [by_text.get(text, text) for text in state["model_classes"]]
        return cls(booster, FeatureSchema.load(model_dir), task, model_classes, state["details"])

    def info(self) -> dict[str, Any]:
        return dict(self.details)

    def stopped_by_time(self) -> bool:
        return bool(self.details.get("stopped_by_time"))

    def booster_graph(self, graph: Any) -> OnnxGraph:
        """`graph`, the whole booster converted with one input X (the booster's matrix): classifiers
        answer (label, probabilities), regressors (values)."""
        classification = self.task.is_classification
        return OnnxGraph(graph, lambda X: {"X": self._input(X)}, 1 if classification else 0,
                         list(self.model_classes) if classification else [], "the whole booster "
                         "(categories go in as the codes of their levels)")
