"""What the pytabkit adapters share (tabm, realmlp): TabArena's neural networks, trained from scratch
by pytabkit's scikit-learn classes (`TabM_D_*`, `RealMLP_TD_*`, its tuned defaults), no weights fetched.

pytabkit's single-model classes have no time limit of their own (only its ensembles and searches take
`time_limit_s`, between models). Their params fix the epochs: RealMLP's learning-rate schedule runs
over `n_epochs` (256), TabM trains until 16 epochs without improvement on its validation split. So
the adapter measures an epoch first, with two short fits of the same seeded model (1 and 2 epochs:
their difference is one epoch, the rest the fixed part, preprocessing and set-up), then gives the fit
the epochs the remaining time pays for, at most the framework's own (where that is no more than the
second probe had, the second probe is the model). RealMLP (Lightning) also takes
pytabkit's `time_to_fit_in_seconds` as a hard stop; TabM's loop takes none, so its cap is the epochs.

Categorical columns go in as pandas categories of the levels fixed at fit time (pytabkit embeds or
one-hot encodes them itself, a missing level being its own); a missing number is not allowed by
pytabkit and goes in as that column's training median. Classes are coded in the task's order.
Saved with joblib (torch modules inside: loaded again in the same environment).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tasks.frameworks._sampling import RowCap
from tasks.frameworks._tabular import (
    FeatureSchema,
    encoded_target,
    labels_from_proba,
    numbers_as_float,
    proba_frame,
    search_seconds,
)
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget

VERSION = "1.7.3"
ESTIMATOR_FILE = "pytabkit.joblib"
STATE_FILE = "pytabkit.json"
# The fit's time: the two probe fits and the training, then saving and predicting the validation split.
TIME_LIMIT_SHARE = 0.85
TIME_RESERVE_S = 3.0
# One epoch measured on a loaded machine may come out shorter than the next ones: never count an epoch
# as less than this share of the 1-epoch probe (set-up and one epoch together).
MIN_EPOCH_SHARE_OF_PROBE = 0.2
PROBE_EPOCHS = (1, 2)


def environment(framework: str) -> tuple[EnvironmentSpec, ...]:
    """pytabkit pulls torch and Lightning: an environment of its own, named after the framework."""
    return (EnvironmentSpec(VERSION, requirements=(f"pytabkit=={VERSION}",),
                            imports=("pytabkit.models.sklearn.sklearn_interfaces",)),)


@dataclass(frozen=True)
class EpochPlan:
    """How many epochs the fit gets, from the two probes' seconds."""

    fixed_s: float
    epoch_s: float
    epochs: int
    stopped_by_time: bool

    @classmethod
    def measured(cls, one_epoch_s: float, two_epochs_s: float, seconds_left: float,
                 own_epochs: int) -> EpochPlan:
        epoch_s = max(two_epochs_s - one_epoch_s, MIN_EPOCH_SHARE_OF_PROBE * one_epoch_s, 1e-6)
        fixed_s = max(0.0, one_epoch_s - epoch_s)
        affordable = math.floor((seconds_left - fixed_s) / epoch_s)
        epochs = max(1, min(own_epochs, affordable))
        return cls(fixed_s, epoch_s, epochs, stopped_by_time=affordable < own_epochs)


def pytabkit_frame(X: pd.DataFrame, schema: FeatureSchema, medians: dict[str, float]) -> pd.DataFrame:
    """The model's columns as pytabkit reads them: categories of the fixed levels, numbers as float
    with a missing value as the training median, column names as strings."""
    frame = numbers_as_float(schema.apply(X), schema)
    for column, median in medians.items():
        frame[column] = frame[column].fillna(median)
    frame.columns = [str(column) for column in frame.columns]
    return frame


class PytabkitModel(FittedModel):
    def __init__(self, estimator: Any, schema: FeatureSchema, task: TaskInfo, model_classes: list[Any],
                 medians: dict[str, float], details: dict[str, Any]) -> None:
        self.estimator = estimator
        self.schema = schema
        self.task = task
        self.model_classes = model_classes  # what the estimator's classes 0..k-1 stand for
        self.medians = medians
        self.details = details

    def _input(self, X: pd.DataFrame) -> pd.DataFrame:
        return pytabkit_frame(X, self.schema, self.medians)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return np.asarray(self.estimator.predict(self._input(X)), dtype=float).reshape(-1)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = np.asarray(self.estimator.predict_proba(self._input(X)), dtype=float)
        classes = [self.model_classes[int(code)] for code in self.estimator.classes_]
        return proba_frame(matrix, classes, self.task)

    def save(self, model_dir: Path) -> None:
        import joblib

        model_dir.mkdir(parents=True, exist_ok=True)
        joblib.dump(self.estimator, model_dir / ESTIMATOR_FILE)
        state = {"classes": self.model_classes, "medians": self.medians, "details": self.details}
        (model_dir / STATE_FILE).write_text(json.dumps(state, default=str))
        self.schema.save(model_dir)

    @property
    def fit_rows(self) -> int | None:
        return int(self.details["fit_rows"]) if self.details.get("sampled") else None

    def info(self) -> dict[str, Any]:
        return dict(self.details)

    def stopped_by_time(self) -> bool:
        return bool(self.details.get("stopped_by_time"))

    def training_costs(self) -> dict[str, float]:
        return {"epochs": float(self.details["epochs"])} if "epochs" in self.details else {}


class PytabkitAdapter(FrameworkAdapter):
    """One pytabkit model class pair; a subclass names them and the framework's own epochs."""

    package = "pytabkit"
    fixed_work = True  # its epochs, unless the budget's time pays for fewer
    uses_gpu = True  # device="cuda" when the job holds a GPU
    classifier: ClassVar[str]  # class names in pytabkit.models.sklearn.sklearn_interfaces
    regressor: ClassVar[str]
    own_epochs: ClassVar[int]  # what its defaults train at most
    # Whether it stops by itself before its epochs (TabM's early stopping): then a cap set by the time
    # does not say that the time stopped it, and its fitted model does not say which epoch it ended at.
    stops_early: ClassVar[bool] = False
    row_cap: ClassVar[RowCap]
    # pytabkit's hard stop inside the training loop (Lightning's max_time), where the model has one.
    honours_time_to_fit: ClassVar[bool] = False

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, _ = split_params(params)
        self.row_cap.check(adapter_params.get("max_train_rows"))

    def start(self, budget: Budget, workdir: Path) -> None:
        import pytabkit.models.sklearn.sklearn_interfaces  # noqa: F401 - torch's imports are start-up

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
    ) -> PytabkitModel:
        from pytabkit.models.sklearn import sklearn_interfaces

        started = time.monotonic()
        limit_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        adapter_params, framework_params = split_params(params)
        X, y, sampled = self.row_cap.sample(X, y, budget, adapter_params, seed,
                                            stratify=task.is_classification, task=task)
        schema = FeatureSchema.learn(X, task)
        numbers = numbers_as_float(schema.apply(X), schema)
        medians = {str(column): float(np.nan_to_num(numbers[column].median()))
                   for column in schema.columns if column not in schema.levels}
        frame = pytabkit_frame(X, schema, medians)
        model_classes, target = encoded_target(y, task)
        estimator_class = getattr(sklearn_interfaces, self.classifier if task.is_classification
                                  else self.regressor)
        options: dict[str, Any] = {"n_threads": budget.cores, "random_state": seed, "verbosity": 0,
                                   "device": "cuda" if budget.gpus else "cpu", **framework_params}
        own_epochs = int(framework_params.get("n_epochs") or self.own_epochs)

        probes = []
        for epochs in PROBE_EPOCHS:
            probe_started = time.monotonic()
            estimator = estimator_class(**{**options, "n_epochs": epochs}).fit(frame, target)
            probes.append(time.monotonic() - probe_started)
        plan = EpochPlan.measured(probes[0], probes[1], limit_s - (time.monotonic() - started), own_epochs)
        if plan.epochs > PROBE_EPOCHS[-1] or own_epochs < PROBE_EPOCHS[-1]:
            estimator = estimator_class(**{**options, "n_epochs": plan.epochs})
            fit_options: dict[str, Any] = {}
            if self.honours_time_to_fit:
                fit_options["time_to_fit_in_seconds"] = max(1, int(limit_s - (time.monotonic() - started)))
            estimator.fit(frame, target, **fit_options)
        else:  # the time pays for no more epochs than the last probe had: that probe is the model
            plan = replace(plan, epochs=PROBE_EPOCHS[-1])
        details: dict[str, Any] = {
            # TabM's early stopping may end it before its cap: its epochs are then a cap, not a count.
            ("max_epochs" if self.stops_early else "epochs"): plan.epochs, "own_epochs": own_epochs,
            "stopped_by_time": plan.stopped_by_time and not self.stops_early,
            "epochs_capped_by_time": plan.stopped_by_time,
            "epoch_s": round(plan.epoch_s, 4), "fixed_s": round(plan.fixed_s, 3),
            "probe_s": [round(seconds, 3) for seconds in probes], "time_limit_s": round(limit_s, 1),
            "device": options["device"], "fit_rows": len(X)}
        if sampled is not None:
            details["sampled"] = sampled.sentence()
        return PytabkitModel(estimator, schema, task, model_classes, medians, details)

    def load(self, model_dir: Path, task: TaskInfo) -> PytabkitModel:
        import joblib

        state = json.loads((model_dir / STATE_FILE).read_text())
        return PytabkitModel(joblib.load(model_dir / ESTIMATOR_FILE), FeatureSchema.load(model_dir), task,
                             state["classes"], state["medians"], state.get("details", {}))
