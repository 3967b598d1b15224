"""The post-job evaluation interface: what is measured on a job's saved model after the job.

Serving under load, robustness on corrupted folds, explanations, export: each is one module of
this package exposing ``EVALUATION``, an instance of a ``PostJobEvaluation`` subclass. Like a
framework adapter it imports its heavy libraries inside its functions, so the registry imports
cheaply. It never scores by itself: ``EvaluationContext.score`` is the harness's scoring.

A suite turns one on with a top-level block named after it (``serving: {enabled: true, ...}``);
the block is validated by the evaluation's own ``settings_model``, which forbids unknown fields.
"""

from __future__ import annotations

import json
import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field

from tasks.data.fold_data import load_fold
from tasks.figures import Figure
from tasks.frameworks.registry import load_saved_model
from tasks.metrics import score
from tasks.results import MODEL_DIR
from tasks.specs import Budget, DatasetSpec

EvaluationStatus = Literal["ok", "partial", "failed", "timeout", "memory", "not applicable"]
RESULT_FILE = "result.json"


class EvaluationSettings(BaseModel):
    """A suite's block for one evaluation. Subclasses add their own fields; unknown ones are refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = False
    # The stage's own wall-time limit per job, never taken from the framework's search budget.
    time_s: int = Field(default=60, gt=0)


@dataclass
class EvaluationResult:
    """Plain data, written to the evaluation's folder first, then logged by tracking."""

    status: EvaluationStatus
    reason: str = ""  # why it is not ok (one line, then the error's last lines)
    metrics: dict[str, float] = field(default_factory=dict)  # names from the evaluation's `metrics`
    files: list[str] = field(default_factory=list)  # relative to the evaluation folder; logged as artifacts
    info: dict[str, Any] = field(default_factory=dict)  # anything else worth keeping (JSON-able)
    wall_s: float = 0.0
    # Outcomes in words (names from the evaluation's `tags`), logged as job tags beside its status.
    tags: dict[str, str] = field(default_factory=dict)

    def save(self, folder: Path) -> Path:
        path = folder / RESULT_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True, default=str))
        tmp.replace(path)
        return path

    def summary(self) -> dict[str, Any]:
        """What the job's result.json keeps of it (the folder holds the rest)."""
        kept = {"status": self.status, "reason": self.reason, "metrics": dict(self.metrics),
                "files": list(self.files), "wall_s": self.wall_s}
        return {**kept, "tags": dict(self.tags)} if self.tags else kept

    @classmethod
    def load(cls, folder: Path) -> EvaluationResult:
        data = json.loads((folder / RESULT_FILE).read_text())
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class EvaluationContext:
    """What an evaluation may use. Data and model load lazily, so a quick refusal costs nothing."""

    job: Any  # tasks.plan.Job
    spec: DatasetSpec
    job_dir: Path
    folder: Path  # the evaluation's own folder inside the job folder: its files go here
    settings: EvaluationSettings
    cores: list[int]
    started: float = field(default_factory=time.monotonic)

    @property
    def budget(self) -> Budget:
        return self.job.budget

    @property
    def model_dir(self) -> Path:
        return self.job_dir / MODEL_DIR

    @cached_property
    def fold(self) -> Any:  # tasks.data.fold_data.FoldData

        return load_fold(self.spec, self.job.fold)

    @cached_property
    def model(self) -> Any:  # tasks.frameworks.base.FittedModel

        return load_saved_model(self.model_dir)[0]

    def time_left_s(self) -> float:
        return self.settings.time_s - (time.monotonic() - self.started)

    def score(self, predictions: Any, proba: pd.DataFrame | None,
              truth: pd.Series | None = None) -> dict[str, float]:
        """The harness's scores of predictions on the test fold (or on `truth`), as for the job itself."""

        task = self.fold.task
        return score(task.problem_type, task.metric, self.fold.y_test if truth is None else truth,
                     predictions, proba, task.classes)


class PostJobEvaluation(ABC):
    """One kind of evaluation on a saved model. Constructed with no arguments."""

    name: ClassVar[str]  # also the suite block's key and the job folder's evaluations/NAME/
    settings_model: ClassVar[type[EvaluationSettings]] = EvaluationSettings
    # The MLflow metrics it records, each declared with its meaning, unit, direction and readers
    # (tasks/figures.py); the vocabulary page, compare and the report read them from here.
    figures: ClassVar[tuple[Figure, ...]] = ()
    # Job tag names it records in words (NAME -> meaning), e.g. an export's ok | unsupported.
    tags: ClassVar[dict[str, str]] = {}
    # Seconds the watchdog allows on top of settings.time_s for start-up and writing results.
    grace_s: ClassVar[float] = 30.0

    @property
    def metrics(self) -> dict[str, str]:
        """Its figures' names and meanings (NAME -> meaning), in declaration order."""
        return {figure.name: figure.meaning for figure in self.figures}

    def applies_to(self, spec: DatasetSpec, framework: str) -> str | None:
        """Why this evaluation does not apply to a job of `framework` on `spec`, or None if it does."""
        return None

    def on_failure(self, outcome: EvaluationResult) -> None:
        """Fill in the outcome of a run that crashed or was killed at its time or memory limit
        (its status and reason are set): the evaluation's own tags and metrics for that case, so a
        report shows the failure instead of a blank. By default there are none."""
        return None

    @abstractmethod
    def run(self, context: EvaluationContext) -> EvaluationResult:
        """Measure the saved model; write files into context.folder. Raise on failure."""
