"""What a fitted model can offer the post-job evaluations beyond predicting, as plain data.

A model is asked (tasks/frameworks/base.py, ``FittedModel``): a tree ensemble shap's tree explainer
reads, an ONNX conversion, the framework's own feature importance, its own deployable artifact
(H2O's MOJO), the tokens of its text input, its torch network. What it does not offer it refuses
with ``NotOffered`` and one line saying why, so the evaluations never branch on a framework's name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd


class NotOffered(Exception):
    """The fitted model does not offer this; the message (one line) says why."""


def not_offered(exc: Exception) -> NotOffered:
    """A converter's or a library's refusal as NotOffered, its message's first line kept."""
    text = f"{type(exc).__name__}: {exc}".strip()
    return NotOffered(text.splitlines()[0][:400] if text else type(exc).__name__)


@dataclass(frozen=True)
class TreeEnsemble:
    """A fitted tree ensemble shap's TreeExplainer reads, and how a frame becomes its input."""

    estimator: Any
    transform: Callable[[pd.DataFrame], Any]
    # Column i of the transformed input is the model feature `columns[i]`.
    columns: list[str]


@dataclass
class OnnxGraph:
    """One ONNX graph that answers as the model does, and how a frame feeds it."""

    model: Any  # onnx.ModelProto
    feed: Callable[[pd.DataFrame], dict[str, np.ndarray]]  # a frame -> the graph's inputs
    # Output index of the probabilities (classification) or values (regression).
    output: int
    classes: list[Any]  # the graph's class order (classification)
    covers: str  # what the graph covers, in words


@dataclass
class OnnxCompiled:
    """A copy of the model whose parts its framework runs through ONNX (several graphs, its own
    glue in Python): how it answers, and the graphs it wrote."""

    # Probabilities in the task's class order (classification) or values as one column.
    output: Callable[[pd.DataFrame], np.ndarray]
    graphs: list[Path]
    covers: str
    scratch: Path | None = None  # the working copy, removed once the export is measured


@dataclass(frozen=True)
class NativeImportance:
    """The framework's own feature importance: columns feature, importance[, stddev, p_value]."""

    kind: str  # what it is, in words: "autogluon feature_importance", "h2o varimp"
    table: pd.DataFrame = field(repr=False)


@dataclass(frozen=True)
class NativeArtifact:
    """The framework's own deployable file (H2O's MOJO): its kind and where it was written."""

    kind: str
    path: Path


@dataclass(frozen=True)
class AnytimeCandidate:
    """One model the search had ready `ready_s` seconds into the fit, and how it answers.

    The harness scores it on the test fold (tasks/anytime.py); the framework only says when it was
    ready, how it rated it on its own validation data (what it picks its final model by), and
    whether it is the model the job returned.
    """

    name: str
    ready_s: float
    validation: float | None  # the framework's validation score, higher is better; None when unknown
    predict: Callable[[pd.DataFrame], np.ndarray]
    predict_proba: Callable[[pd.DataFrame], pd.DataFrame] | None  # classification
    final: bool = False
    timing: str = ""  # how ready_s was derived, in words
    # How its model was had, in words ("kept by the search", "refitted from the search log"): a
    # framework that keeps no earlier model says so here, per point.
    source: str = ""
    # Seconds its first predict costs beyond predicting (a refit from the search's log): the
    # harness stops scoring the curve rather than run past its time for it.
    cost_s: float = 0.0


@dataclass(frozen=True)
class TorchNetwork:
    """The model's torch network and how a frame becomes its input, for the signals and attacks that
    need the network itself (activation coverage through forward hooks, gradient attacks)."""

    module: Any  # torch.nn.Module, answering logits in `classes` order
    # A frame of cases -> the network's input: a tensor, or a mapping of tensors passed as keywords.
    inputs: Callable[[pd.DataFrame], Any]
    classes: list[str]
    # Continuous inputs gradients may move (pixels): their (low, high) range and one input's shape;
    # None where the input is discrete (token ids), so gradient attacks do not apply.
    clip_values: tuple[float, float] | None = None
    input_shape: tuple[int, ...] | None = None
    # What a neuron is for activation coverage (signals.activation_coverage): "flat", every output
    # value of a case (fixed-size images); "last_axis", a unit of the last axis at any position
    # (token sequences, whose length varies with the batch's padding).
    units: str = "flat"
