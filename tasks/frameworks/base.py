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

from tasks.frameworks.capabilities import (
    AnytimeCandidate,
    NativeArtifact,
    NativeImportance,
    NotOffered,
    OnnxCompiled,
    OnnxGraph,
    TorchNetwork,
    TreeEnsemble,
)
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget, DatasetSpec
from tasks.task_info import ForecastTask as ForecastTask  # re-exported: the adapter interface
from tasks.task_info import TaskInfo as TaskInfo  # re-exported: the adapter interface


class JobFailure(Exception):
    """A failure whose message is the whole story: the worker records it as that one sentence,
    without the exception's type or a traceback."""


class NoModelTrained(JobFailure):
    """The framework finished its fit within the budget without a single trained model.

    The worker records the job as failed with this one sentence (no traceback): the user's fix is
    a larger budget or fewer training rows, not a bug to hunt.
    """

    def __init__(self, framework: str, time_s: float, rows: int) -> None:
        super().__init__(f"{framework} trained no model within {time_s:g} s on {rows:,} rows; raise the "
                         "budget's time or set `_max_train_rows`")


class FittedModel(ABC):
    """A trained model as the worker sees it, and what it offers the post-job evaluations.

    Capabilities are asked, never inferred from the framework's name: each method below returns
    what the model offers or raises ``NotOffered`` with one line saying why. The defaults offer
    nothing; an adapter's model overrides what it has.
    """

    # The framework's own importance, in words ("h2o varimp"), when the model has one to compute.
    native_importance_kind: ClassVar[str | None] = None
    # The framework's own deployable file ("mojo"), when the model can write one.
    native_artifact_kind: ClassVar[str | None] = None

    @abstractmethod
    def predict(self, X: pd.DataFrame) -> np.ndarray:
        """Labels (classification) or values (regression), one per row."""

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        """Class probabilities, one column per class label in TaskInfo.classes order."""
        raise NotImplementedError("regression models have no class probabilities")

    def predict_with_proba(self, X: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
        """Labels and class probabilities of one classification call (what a served model answers).
        Two calls by default; a model whose label is the most probable class overrides it with one."""
        return self.predict(X), self.predict_proba(X)

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

    def training_costs(self) -> dict[str, float]:
        """Figures of the training itself, recorded as the job's cost metrics (the vocabulary's
        TRAINING_COSTS: epochs, training images/s, data-wait share); none by default."""
        return {}

    # ------------------------------------------------------------ capabilities

    def tree_ensemble(self) -> TreeEnsemble:
        """The fitted tree ensemble shap's tree explainer reads directly, with its input transform."""
        raise NotOffered("its fitted model is not a plain tree ensemble shap reads")

    def to_onnx(self, folder: Path) -> OnnxGraph | OnnxCompiled:
        """The model in ONNX: one graph, or a compiled copy written under `folder`."""
        raise NotOffered("no ONNX converter for this model")

    def native_importance(self, X: pd.DataFrame, y: pd.Series, time_limit_s: float) -> NativeImportance:
        """The framework's own feature importance on (X, y), within time_limit_s; see
        native_importance_kind."""
        raise NotOffered("the framework offers no importance of its own")

    def native_artifact(self, folder: Path) -> NativeArtifact:
        """The framework's own deployable file written under `folder`; see native_artifact_kind."""
        raise NotOffered("the framework has no deployable file of its own")

    def text_tokens(self) -> str:
        """The regular expression splitting a text into the tokens the model reads, for a model
        cheap enough to call on many masked copies of a text (token-level SHAP)."""
        raise NotOffered("token-level SHAP needs a tokenizer shap can mask with cheaply; this model has none")

    def stopped_by_time(self) -> bool:
        """Whether its fit ended because the budget's time was spent, before the work its params set
        (rounds, trees, epochs) was done; False for a model whose fit did all its work."""
        return False

    def anytime_candidates(self) -> list[AnytimeCandidate]:
        """The models the search had ready along the fit (the score-over-time curve's points)."""
        raise NotOffered("the framework exposes no record of its search's progress")

    def torch_network(self) -> TorchNetwork:
        """Its torch network and how a frame becomes the network's input."""
        raise NotOffered("its model is not a torch network")


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
    # Its params fix its work (rounds, trees, epochs); the budget's time only caps it, so more cores
    # or GPUs change its fit time, not what it fits (the report's Scaling section compares fit_s).
    # False: it searches until its time is spent (AutoML), so more resources change its result.
    fixed_work: ClassVar[bool] = False
    # Extra seconds the watchdog allows on top of the budget for a start-up outside the search
    # (H2O's JVM); see tasks/jobs.py for the grace every job gets.
    startup_grace_s: ClassVar[float] = 0.0
    # Versions that run in an environment of their own (`NAME@VERSION` in a suite), see
    # tasks/frameworks/environments.py. The main environment's version needs no declaration.
    environments: ClassVar[tuple[EnvironmentSpec, ...]] = ()
    # The framework of tasks.metric_registry.METRIC_FRAMEWORKS whose metric names this adapter tells
    # its framework to optimise the suite metric by; None: it optimises no suite metric.
    metric_names: ClassVar[str | None] = None
    # Libraries its saved models may load besides `package` (a served model pins those installed).
    serving_packages: ClassVar[tuple[str, ...]] = ()

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

    def applies_to(self, spec: DatasetSpec) -> str | None:
        """Why this framework cannot take the dataset `spec` describes (one sentence), or None.

        The plan asks before any job runs (and the job runner again, for a job given directly);
        such a job is recorded as skipped with the reason. By default: the problem types and
        modalities the adapter declares. An adapter with limits of its own overrides it, e.g. rows
        (`spec.rows`, the card's declared count, which the data gate checks) or column roles.
        """
        if spec.problem_type not in self.problem_types or spec.modality not in self.modalities:
            return f"{self.name} does not handle {spec.modality} {spec.problem_type} problems."
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
