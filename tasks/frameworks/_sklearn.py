"""What the scikit-learn baselines share: fitting one estimator on the learned feature schema,
the fitted-model wrapper, and saving with joblib."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from tasks.frameworks._onnx import sklearn_graph
from tasks.frameworks._sampling import PARAM as ROWS_PARAM
from tasks.frameworks._sampling import RowCap, Sampled
from tasks.frameworks._tabular import FeatureSchema, proba_frame
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.capabilities import OnnxGraph
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget

ESTIMATOR_FILE = "estimator.joblib"
# Earlier scikit-learn releases, each in an environment of its own (`hgb@1.7.2`, `rf@1.8.0`), next
# to the main environment's: quick to install, so the version-to-version comparison is cheap to try.
SKLEARN_ENVIRONMENTS = tuple(
    EnvironmentSpec(version, requirements=(f"scikit-learn=={version}",), imports=("sklearn.ensemble",))
    for version in ("1.7.2", "1.8.0")
)


class SklearnModel(FittedModel):
    """A fitted scikit-learn estimator plus the feature schema it was fitted with."""

    def __init__(self, estimator: Any, schema: FeatureSchema, task: TaskInfo,
                 sampled: Sampled | None = None) -> None:
        self.estimator = estimator
        self.schema = schema
        self.task = task
        self.sampled = sampled  # when fitted on a sample

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.estimator.predict(self.schema.apply(X)))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = self.estimator.predict_proba(self.schema.apply(X))
        return proba_frame(matrix, list(self.estimator.classes_), self.task)

    def predict_with_proba(self, X: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame]:
        # A scikit-learn classifier's predict is the class of highest probability (its own
        # classes_[argmax(predict_proba)]): one pass through the schema, the pipeline and the trees
        # instead of two, about half a served request's model time.
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = np.asarray(self.estimator.predict_proba(self.schema.apply(X)))
        labels = np.asarray(self.estimator.classes_).take(np.argmax(matrix, axis=1), axis=0)
        return labels, proba_frame(matrix, list(self.estimator.classes_), self.task)

    def info(self) -> dict[str, Any]:
        # A boosted model that stops on a time limit (hgb): how far it got, so a short model is
        # seen to be one.
        final = self.estimator.steps[-1][1] if hasattr(self.estimator, "steps") else self.estimator
        recorded: dict[str, Any] = {"sampled": self.sampled.sentence()} if self.sampled else {}
        if hasattr(final, "stopped_by_time"):
            recorded.update(boosting_rounds=int(final.n_iter_), max_rounds=int(final.max_iter),
                            stopped_by_time=final.stopped_by_time())
        return recorded

    def stopped_by_time(self) -> bool:
        final = self.estimator.steps[-1][1] if hasattr(self.estimator, "steps") else self.estimator
        return bool(final.stopped_by_time()) if hasattr(final, "stopped_by_time") else False

    def to_onnx(self, folder: Path) -> OnnxGraph:
        return sklearn_graph(self.estimator, self.schema, self.task, covers="the whole fitted estimator")

    def save(self, model_dir: Path) -> None:
        import joblib

        model_dir.mkdir(parents=True, exist_ok=True)
        joblib.dump(self.estimator, model_dir / ESTIMATOR_FILE)
        self.schema.save(model_dir)

    @classmethod
    def load(cls, model_dir: Path, task: TaskInfo) -> SklearnModel:
        import joblib

        return cls(joblib.load(model_dir / ESTIMATOR_FILE), FeatureSchema.load(model_dir), task)


class SklearnAdapter(FrameworkAdapter):
    """A baseline that is one scikit-learn estimator: subclasses build it, this fits and loads it."""

    package = "scikit-learn"
    install_hint = "pip install scikit-learn"
    environments = SKLEARN_ENVIRONMENTS
    model_class: ClassVar[type[SklearnModel]] = SklearnModel  # what the adapter's models offer
    # The most rows the estimator is fitted on within a budget (tasks/frameworks/_sampling.py);
    # None: it takes every row it is given.
    row_cap: ClassVar[RowCap | None] = None

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, _ = split_params(params)
        if self.row_cap is not None:
            self.row_cap.check(adapter_params.get(ROWS_PARAM))

    @abstractmethod
    def estimator(
        self, schema: FeatureSchema, task: TaskInfo, budget: Budget, params: dict[str, Any], seed: int
    ) -> Any:
        """The unfitted estimator for this task; `params` (the suite's) override its defaults."""

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
    ) -> SklearnModel:
        adapter_params, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        sampled = None
        if self.row_cap is not None:
            X, y, sampled = self.row_cap.sample(X, y, budget, adapter_params, seed,
                                                stratify=task.is_classification, task=task)
        estimator = self.estimator(schema, task, budget, framework_params, seed)
        estimator.fit(schema.apply(X), y)
        return self.model_class(estimator, schema, task, sampled)

    def load(self, model_dir: Path, task: TaskInfo) -> SklearnModel:
        return self.model_class.load(model_dir, task)
