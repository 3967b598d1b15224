"""MLJAR (mljar-supervised): AMLB's `mljarsupervised`. Its modes are the variants, `mljar:Compete`
(AMLB's, the default here), `mljar:Perform`, `mljar:Explain`; it trains its algorithms one after
another within `total_time_limit`, then ensembles (and stacks in Compete) the best.

Categorical columns go in as pandas categories of the levels fixed at fit time (MLJAR encodes them
itself); labels as strings. MLJAR writes its models in its own `results_path`, which the saved model
folder holds a copy of and reloads with MLJAR's own loader. It has no memory setting of its own: the
watchdog's limit is the only one. Runs in an environment of its own (`mljar@1.3.2`).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import (
    FeatureSchema,
    labels_from_proba,
    numbers_as_float,
    proba_frame,
    search_seconds,
)
from tasks.frameworks.base import (
    FittedModel,
    FrameworkAdapter,
    NoModelTrained,
    TaskInfo,
    preset_params,
    split_params,
)
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget

RESULTS_DIR = "mljar"  # MLJAR's results_path inside the model folder
MODES = ("Compete", "Perform", "Explain", "Optuna")
ML_TASKS = {"binary": "binary_classification", "multiclass": "multiclass_classification",
            "regression": "regression"}
# The suite metric in MLJAR's names; others leave MLJAR's default for the task.
EVAL_METRICS = {"auc": "auc", "logloss": "logloss", "acc": "accuracy", "f1": "f1", "rmse": "rmse",
                "mae": "mae", "r2": "r2"}
# MLJAR finishes the model it is training past total_time_limit, then ensembles: total_time_limit 14 s
# gave a 23.6 s fit on penguins (Compete, 1 core, loaded 2-core machine). Half of time_s, 12 s back.
TIME_LIMIT_SHARE = 0.5
TIME_RESERVE_S = 12.0
ENVIRONMENTS = (EnvironmentSpec("1.3.2", requirements=("mljar-supervised==1.3.2",), imports=("supervised",)),)


def mljar_frame(X: pd.DataFrame, schema: FeatureSchema) -> pd.DataFrame:
    """The model's columns as MLJAR reads them: categories of the fixed levels, numbers as float."""
    frame = numbers_as_float(schema.apply(X), schema)
    frame.columns = [str(column) for column in frame.columns]
    return frame


class MljarModel(FittedModel):
    def __init__(self, automl: Any, schema: FeatureSchema, task: TaskInfo, results: Path) -> None:
        self.automl = automl
        self.schema = schema
        self.task = task
        self.results = results  # MLJAR's results_path

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return labels_from_proba(self.predict_proba(X))
        return np.asarray(self.automl.predict(mljar_frame(X, self.schema)), dtype=float)

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        answered = self.automl.predict_all(mljar_frame(X, self.schema))
        columns = [column for column in answered.columns if column.startswith("prediction_")]
        classes = [column.removeprefix("prediction_") for column in columns]
        return proba_frame(answered[columns].to_numpy(dtype=float), classes, self.task)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        if self.results.resolve() != (model_dir / RESULTS_DIR).resolve():
            shutil.copytree(self.results, model_dir / RESULTS_DIR, dirs_exist_ok=True)
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return max(1, len(self.automl._models))

    def info(self) -> dict[str, Any]:
        board = self.automl.get_leaderboard()
        return {"best_model": str(self.automl._best_model.get_name()),
                "leaderboard": board[["name", "model_type", "metric_value", "train_time"]]
                .to_dict(orient="records")}


class MljarAdapter(FrameworkAdapter):
    name = "mljar"
    package = "mljar-supervised"
    install_hint = "automl-eval frameworks install mljar@1.3.2 (a suite names it mljar@1.3.2)"
    environments = ENVIRONMENTS
    serving_packages = ("xgboost", "lightgbm", "catboost")

    def variant_params(self, variant: str) -> dict[str, Any]:
        return {"mode": preset_params(self.name, variant, MODES)["presets"]}

    def start(self, budget: Budget, workdir: Path) -> None:
        import supervised.automl  # noqa: F401 - its imports belong to start-up, not to the search

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
    ) -> MljarModel:
        from supervised.automl import AutoML

        _, framework_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        results = workdir / RESULTS_DIR
        options: dict[str, Any] = {
            "results_path": str(results),
            "mode": "Compete",
            "ml_task": ML_TASKS[task.problem_type],
            "total_time_limit": int(search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S)),
            "n_jobs": budget.cores,
            "random_state": seed,
            "verbose": 0,
        }
        if task.metric in EVAL_METRICS and not (task.metric == "auc" and task.problem_type != "binary"):
            options["eval_metric"] = EVAL_METRICS[task.metric]
        automl = AutoML(**{**options, **framework_params})
        target = y.astype(str) if task.is_classification else pd.to_numeric(y).astype(float)
        automl.fit(mljar_frame(X, schema), target.reset_index(drop=True))
        if not getattr(automl, "_models", None):
            raise NoModelTrained(self.name, budget.time_s, len(X))
        return MljarModel(automl, schema, task, results)

    def load(self, model_dir: Path, task: TaskInfo) -> MljarModel:
        from supervised.automl import AutoML

        results = model_dir / RESULTS_DIR
        return MljarModel(AutoML(results_path=str(results)), FeatureSchema.load(model_dir), task, results)

    def test_params(self) -> dict[str, Any]:
        return {"mode": "Explain", "algorithms": ["Decision Tree", "Linear"], "explain_level": 0,
                "train_ensemble": False}


ADAPTER = MljarAdapter()
