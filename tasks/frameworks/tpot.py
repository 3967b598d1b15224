"""TPOT 1.x: genetic programming over scikit-learn pipelines (AMLB's `TPOT`), evaluated by
cross-validation on a dask cluster, the best pipeline refitted on every row.

Its cluster is the adapter's own, in the worker's process (threads, not processes: the job's memory
is counted and nothing outlives the job), one dask worker with `cores` threads and the budget's
memory as its limit. TPOT reads numbers: categorical columns go in as the codes of the levels fixed at
fit time, which TPOT's own preprocessing imputes and one-hot encodes (`categorical_features`);
classes are coded in the task's order. Runs in an environment of its own (`tpot@1.1.0`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import (
    FeatureSchema,
    code_matrix,
    encoded_target,
    labels_from_proba,
    proba_frame,
    search_seconds,
)
from tasks.frameworks.base import FittedModel, FrameworkAdapter, NoModelTrained, TaskInfo, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget

PIPELINE_FILE = "tpot_pipeline.joblib"  # the fitted scikit-learn pipeline TPOT picked
STATE_FILE = "tpot.json"
# TPOT stops starting generations at max_time_mins, then finishes the generation's evaluations and
# refits the best pipeline on every row (1 core, loaded 2-core machine): 10 s gave a 16 to 18 s fit on
# breast_cancer and penguins, 30 s a 58.7 s fit on wage (1m1c). So it gets 0.4 of time_s, 12 s back.
TIME_LIMIT_SHARE = 0.4
TIME_RESERVE_S = 12.0
# One pipeline's evaluation (its cross-validation) may take this share of the search's time, and at
# least 10 s (or the whole search, when shorter): under the `test` budget on a loaded machine a 2.7 s
# cap timed out every pipeline of the first generation.
EVAL_TIME_SHARE = 1 / 3
EVAL_TIME_FLOOR_S = 10.0
# Folds of each pipeline's cross-validation: TPOT 1.x's default is 10; 5 as TPOT 0.x had (AMLB's runs).
CV_FOLDS = 5
MEMORY_SHARE = 0.8  # of memory_mb, the dask worker's limit: the rest is the harness's copy of the fold
# The suite metric as a scikit-learn scorer TPOT maximises; others leave TPOT's default.
SCORERS = {"auc": "roc_auc", "logloss": "neg_log_loss", "acc": "accuracy", "balacc": "balanced_accuracy",
           "f1": "f1", "macro_f1": "f1_macro", "rmse": "neg_root_mean_squared_error",
           "mae": "neg_mean_absolute_error", "r2": "r2"}
ENVIRONMENTS = (EnvironmentSpec("1.1.0", requirements=("tpot==1.1.0",), imports=("tpot",)),)


def tpot_frame(X: pd.DataFrame, schema: FeatureSchema) -> pd.DataFrame:
    """The model's columns as TPOT reads them: floats, a category as its level's code, a missing value
    NaN. A frame, not an array: TPOT's imputers pick the numeric columns by name."""
    return pd.DataFrame(code_matrix(schema.apply(X), schema), columns=[str(c) for c in schema.columns])


class TPOTModel(FittedModel):
    def __init__(self, pipeline: Any, schema: FeatureSchema, task: TaskInfo, model_classes: list[Any],
                 searched: dict[str, Any] | None = None) -> None:
        self.pipeline = pipeline
        self.schema = schema
        self.task = task
        self.model_classes = model_classes  # what the pipeline's outputs 0..k-1 stand for
        self.searched = searched or {}

    def _input(self, X: pd.DataFrame) -> pd.DataFrame:
        return tpot_frame(X, self.schema)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return np.asarray(self.pipeline.predict(self._input(X)), dtype=float)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = np.asarray(self.pipeline.predict_proba(self._input(X)), dtype=float)
        classes = [self.model_classes[int(code)] for code in self.pipeline.classes_]
        return proba_frame(matrix, classes, self.task)

    def save(self, model_dir: Path) -> None:
        import joblib

        model_dir.mkdir(parents=True, exist_ok=True)
        joblib.dump(self.pipeline, model_dir / PIPELINE_FILE)
        (model_dir / STATE_FILE).write_text(json.dumps({"classes": self.model_classes}, default=str))
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return int(self.searched.get("pipelines_evaluated", 1)) or 1

    def info(self) -> dict[str, Any]:
        return {"pipeline": " ".join(str(self.pipeline).split())[:2000], **self.searched}


class TPOTAdapter(FrameworkAdapter):
    name = "tpot"
    package = "tpot"
    install_hint = "automl-eval frameworks install tpot@1.1.0 (a suite names it tpot@1.1.0)"
    environments = ENVIRONMENTS
    serving_packages = ("xgboost", "lightgbm")

    def start(self, budget: Budget, workdir: Path) -> None:
        import tpot  # noqa: F401 - dask's and TPOT's imports belong to start-up, not to the search

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
    ) -> TPOTModel:
        import tpot
        from distributed import Client, LocalCluster

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        model_classes, target = encoded_target(y, task)
        search_s = search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)
        categorical = [str(column) for column in schema.columns if column in schema.levels]
        options: dict[str, Any] = {
            "max_time_mins": search_s / 60,
            "max_eval_time_mins": max(search_s * EVAL_TIME_SHARE, min(search_s, EVAL_TIME_FLOOR_S)) / 60,
            "cv": CV_FOLDS,
            "n_jobs": budget.cores,
            "random_state": seed,
            "verbose": 0,
            "preprocessing": True,  # TPOT's imputation and one-hot encoding of the categorical codes
            "categorical_features": categorical or None,
        }
        if task.metric in SCORERS and not (task.metric == "auc" and task.problem_type != "binary"):
            options["scorers"] = [SCORERS[task.metric]]
            options["scorers_weights"] = [1]
        estimator_class = tpot.TPOTClassifier if task.is_classification else tpot.TPOTRegressor
        # The adapter's own cluster: threads in this process, so TPOT starts no processes of its own.
        cluster = LocalCluster(n_workers=1, threads_per_worker=budget.cores, processes=False,
                               memory_limit=int(budget.memory_mb * MEMORY_SHARE) * 2**20,
                               dashboard_address=None, local_directory=str(workdir / "dask"))
        client = Client(cluster)
        try:
            estimator = estimator_class(**{**options, **framework_params}, client=client)
            estimator.fit(tpot_frame(X, schema), target)
        except Exception as exc:
            if "no individuals could be evaluated" in str(exc).lower():  # TPOT's way of saying it
                raise NoModelTrained(self.name, budget.time_s, len(X)) from exc
            raise
        finally:
            client.close()
            cluster.close()
        pipeline = getattr(estimator, "fitted_pipeline_", None)
        if pipeline is None:
            raise NoModelTrained(self.name, budget.time_s, len(X))
        evaluated = getattr(estimator, "evaluated_individuals", None)
        searched = {"max_time_s": round(search_s, 1),
                    "pipelines_evaluated": len(evaluated) if evaluated is not None else 1}
        return TPOTModel(pipeline, schema, task, model_classes, searched)

    def load(self, model_dir: Path, task: TaskInfo) -> TPOTModel:
        import joblib

        state = json.loads((model_dir / STATE_FILE).read_text())
        return TPOTModel(joblib.load(model_dir / PIPELINE_FILE), FeatureSchema.load(model_dir), task,
                         state["classes"])

    def test_params(self) -> dict[str, Any]:
        return {"search_space": "linear-light", "cv": 2, "population_size": 4, "generations": 1}


ADAPTER = TPOTAdapter()
