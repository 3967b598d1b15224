"""A test-only adapter that misbehaves on purpose, chosen by variant: `misbehave:sleep` and so on.

Loaded through AUTOML_EVAL_EXTRA_ADAPTERS (a file path), so it never appears in the shipped
registry. Variants: ok (a constant model), sleep (ignores its budget), allocate (grows memory
without end), abort (os.abort, as a native crash would), raise (a Python exception), spawn (starts
a helper process, as H2O starts its JVM, then ignores its budget), orphan (starts a helper in its
own session, as H2O does, then aborts, leaving it behind), empty (a model that predicts a
0-dimensional array, as FLAML's does when it trained nothing).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo
from tasks.frameworks.constant import ADAPTER as CONSTANT
from tasks.specs import Budget

BEHAVIOURS = ("ok", "sleep", "allocate", "abort", "raise", "spawn", "orphan", "empty")
GRANDCHILD_PID_FILE = "grandchild.pid"
ERROR_MESSAGE = "the misbehaving adapter raised on purpose"
SLEEP_MESSAGE = "the misbehaving adapter sleeps past its budget"


class EmptyModel(FittedModel):
    """Predicts what FLAML's AutoML predicts without an estimator: np.asarray(None)."""

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(None)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)


class MisbehavingAdapter(FrameworkAdapter):
    name = "misbehave"
    package = "scikit-learn"
    install_hint = "pip install scikit-learn"

    def variant_params(self, variant: str) -> dict[str, Any]:
        if variant not in BEHAVIOURS:
            raise ValueError(f"misbehave has no variant '{variant}'")
        return {"_behaviour": variant}

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
    ) -> FittedModel:
        behaviour = params.get("_behaviour", "ok")
        if behaviour == "sleep":
            print(SLEEP_MESSAGE)  # no flush: the worker's output must reach its log unbuffered
            time.sleep(10_000)
        elif behaviour in ("spawn", "orphan"):  # a helper process, as H2O starts its JVM
            # "orphan" starts it in a session of its own (as H2O does) and then crashes.
            helper = subprocess.Popen(["sleep", "10000"], start_new_session=behaviour == "orphan")
            (workdir.parent / GRANDCHILD_PID_FILE).write_text(str(helper.pid))
            time.sleep(1.5 if behaviour == "orphan" else 10_000)  # long enough to be sampled
            os.abort()
        elif behaviour == "allocate":
            hoard = []
            while True:  # 50 MB at a time, touched so it is resident
                hoard.append(bytearray(b"x" * (50 * 2**20)))
                time.sleep(0.05)
        elif behaviour == "abort":
            os.abort()
        elif behaviour == "raise":
            raise RuntimeError(ERROR_MESSAGE)
        elif behaviour == "empty":
            return EmptyModel()

        return CONSTANT.fit(X, y, task=task, budget=budget, params={}, workdir=workdir, seed=seed)

    def load(self, model_dir: Path, task: TaskInfo) -> FittedModel:
        return CONSTANT.load(model_dir, task)


ADAPTER = MisbehavingAdapter()
