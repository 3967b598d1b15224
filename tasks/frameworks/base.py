"""The framework adapter interface. Adapters only fit and predict; the harness scores.

An adapter module imports its framework inside its functions, so the registry imports cheaply
and a framework that is not installed is reported ("not installed: pip install ...") instead of
breaking everything else.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget
from tasks.task_info import ForecastTask as ForecastTask  # re-exported: the adapter interface
from tasks.task_info import TaskInfo


class FittedModel(ABC):
    """A trained model as the worker sees it."""

    @abstractmethod
    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression), one per row."""

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        """Class probabilities, one column per class label in TaskInfo.classes order."""
        raise NotImplementedError("regression models have no class probabilities")

    def predict_quantiles(self, X: pd.DataFrame) -> pd.DataFrame | None:
        """Forecasting: one column per level of ForecastTask.quantile_levels (named by
        tasks.metrics.quantile_column), one row per row of X; None when the model gives none."""
        return None

    @abstractmethod
    def save(self, model_dir: Path) -> None:
        """Write everything needed to predict again into model_dir."""

    @property
    def models_count(self) -> int:
        return 1

    @property
    def fit_rows(self) -> int | None:
        """Training rows the model was fitted on, where the adapter used fewer than it was given
        (a sample to fit the budget); None means all of them."""
        return None

    def info(self) -> dict[str, Any]:
        """Anything worth recording: leaderboard, best model, params actually used."""
        return {}


class FrameworkAdapter(ABC):
    """One per framework. Constructed with no arguments; does no work until fit/load."""

    name: ClassVar[str]
    package: ClassVar[str]  # distribution name, for the version and the install hint
    install_hint: ClassVar[str]
    problem_types: ClassVar[frozenset[str]] = frozenset({"binary", "multiclass", "regression"})
    # A multimodal dataset reaches frameworks as its aligned, windowed table (tasks/align.py), so
    # whatever reads tabular data reads it too.
    modalities: ClassVar[frozenset[str]] = frozenset({"tabular", "multimodal"})
    uses_gpu: ClassVar[bool] = False  # can make use of a GPU when the budget grants one
    # Extra seconds the watchdog allows on top of the budget for a start-up outside the search
    # (H2O's JVM); see tasks/jobs.py for the grace every job gets.
    startup_grace_s: ClassVar[float] = 0.0
    # Versions that run in an environment of their own (`NAME@VERSION` in a suite), see
    # tasks/frameworks/environments.py. The main environment's version needs no declaration.
    environments: ClassVar[tuple[EnvironmentSpec, ...]] = ()
    # The framework of tasks.metric_registry.METRIC_FRAMEWORKS whose metric names this adapter tells
    # its framework to optimise the suite metric by; None: it optimises no suite metric.
    metric_names: ClassVar[str | None] = None

    def version(self) -> str | None:
        """Installed version, or None when the framework is not installed."""
        from importlib import metadata

        try:
            return metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return None

    def unavailable_reason(self) -> str | None:
        """One sentence saying why this framework cannot run here (not installed, no Java), or None."""
        if self.version() is None:
            return f"framework '{self.name}' is not installed; install it with: {self.install_hint}"
        return None

    def start(self, budget: Budget, workdir: Path) -> None:
        """Start what fit needs outside the search (a server, a JVM); timed apart from fit."""
        return None

    def stop(self) -> None:
        """Stop what start started; the worker calls it at the end, whatever happened."""
        return None

    def variant_params(self, variant: str) -> dict[str, Any]:
        """Params implied by `name:variant` in a suite (e.g. AutoGluon presets)."""
        raise ValueError(f"framework '{self.name}' has no variant '{variant}'")

    def check_params(self, params: dict[str, Any]) -> None:
        """Refuse, with a ValueError of one sentence, adapter params (`_name`) of a suite that fit
        could not use: the plan calls it before any job runs."""
        return None

    @abstractmethod
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
        """Search and train within budget.time_s using budget.cores (and GPUs if granted)."""

    @abstractmethod
    def load(self, model_dir: Path, task: TaskInfo) -> FittedModel:
        """Load what FittedModel.save wrote."""

    def test_params(self) -> dict[str, Any]:
        """Tiny settings for the conformance test (scikit-learn's get_test_params habit)."""
        return {}


def preset_params(framework: str, variant: str, presets: Sequence[str]) -> dict[str, Any]:
    """A variant that names one of the framework's presets (AutoGluon's predictors): its fit param."""
    if variant not in presets:
        raise ValueError(f"{framework} has no variant '{variant}'; presets are: {', '.join(presets)}")
    return {"presets": variant}


def split_params(params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """AMLB's rule: `_name` params are for the adapter, the rest pass to the framework."""
    adapter = {k[1:]: v for k, v in params.items() if k.startswith("_")}
    framework = {k: v for k, v in params.items() if not k.startswith("_")}
    return adapter, framework
