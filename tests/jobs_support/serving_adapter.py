"""A test-only adapter for the serving evaluation (added through AUTOML_EVAL_EXTRA_ADAPTERS).

Variants: `sleepy:sleep` predicts the constant model's answer after sleeping SLEEP_MS, one call at
a time (a lock stands for a model that uses its one core fully), so a scoring server with W
workers holds exactly W * 1000 / SLEEP_MS requests per second and no more; its ONNX graph is the
constant model's, fed after the same wait, whatever the rows (a fixed cost per call, which a
batching window spreads over the requests of a batch); `sleepy:unloadable`
fits and saves, but its saved model refuses to load (what the scoring server meets with a broken
model folder); `sleepy:flaky` answers like the constant model but fails every FAIL_EVERY-th call
to predict in each server worker (a server with an error rate, still up).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.frameworks.capabilities import OnnxCompiled, OnnxGraph
from tasks.frameworks.constant import ADAPTER as CONSTANT
from tasks.specs import Budget

SLEEP_MS = 40.0
FAIL_EVERY = 10
FLAKY_ERROR = "this model fails one call in ten on purpose"
BEHAVIOUR_FILE = "behaviour.json"
LOAD_ERROR = "this saved model refuses to load on purpose"
_one_at_a_time = threading.Lock()


class SleepyModel(FittedModel):
    def __init__(self, inner: FittedModel, behaviour: str) -> None:
        self.inner = inner
        self.behaviour = behaviour
        self.calls = 0

    def _sleep(self) -> None:
        if self.behaviour == "sleep":
            with _one_at_a_time:
                time.sleep(SLEEP_MS / 1000)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        self._sleep()
        if self.behaviour == "flaky":
            self.calls += 1
            if self.calls % FAIL_EVERY == 0:  # the first call (the evaluation's check) answers
                raise RuntimeError(FLAKY_ERROR)
        return self.inner.predict(X)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        return self.inner.predict_proba(X)

    def to_onnx(self, folder: Path) -> OnnxGraph | OnnxCompiled:
        graph = self.inner.to_onnx(folder)
        if not isinstance(graph, OnnxGraph):
            return graph
        feed = graph.feed

        def slow_feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            self._sleep()
            return feed(X)

        graph.feed = slow_feed
        return graph

    def save(self, model_dir: Path) -> None:
        self.inner.save(model_dir)
        (model_dir / BEHAVIOUR_FILE).write_text(json.dumps({"behaviour": self.behaviour}))


class SleepyAdapter(FrameworkAdapter):
    name = "sleepy"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"

    def variant_params(self, variant: str) -> dict[str, Any]:
        if variant not in ("sleep", "unloadable", "flaky"):
            raise ValueError(f"sleepy has no variant '{variant}'")
        return {"_behaviour": variant}

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> FittedModel:
        inner = CONSTANT.fit(X, y, task=task, budget=budget, params={}, workdir=workdir, seed=seed)
        # The job's own predictions and latency calls are not what these tests are about.
        return SleepyModel(inner, "fitted:" + str(params.get("_behaviour", "sleep")))

    def load(self, model_dir: Path, task: TaskInfo) -> FittedModel:
        behaviour = json.loads((model_dir / BEHAVIOUR_FILE).read_text())["behaviour"].removeprefix("fitted:")
        if behaviour == "unloadable":
            raise RuntimeError(LOAD_ERROR)
        return SleepyModel(CONSTANT.load(model_dir, task), behaviour)


ADAPTER = SleepyAdapter()
