"""AutoGluon TabularPredictor. Variants are presets: `autogluon:best_quality`."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._tabular import FeatureSchema, proba_frame, search_seconds, text_as_strings
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.specs import Budget

PREDICTOR_DIR = "predictor"
PRESETS = ("medium_quality", "good_quality", "high_quality", "best_quality", "extreme_quality",
           "optimize_for_deployment", "interpretable")
# The suite metric in AutoGluon's names, so it optimises what the harness scores.
EVAL_METRIC = {
    "auc": "roc_auc", "logloss": "log_loss", "acc": "accuracy", "balacc": "balanced_accuracy",
    "f1": "f1", "macro_f1": "f1_macro", "rmse": "root_mean_squared_error",
    "mae": "mean_absolute_error", "r2": "r2",
}
# AutoGluon finishes its current model and the ensemble after time_limit; leave it that room.
# Measured on a loaded 2-core machine: time_limit 17 s gave a 28 s fit.
TIME_LIMIT_SHARE = 0.85
TIME_RESERVE_S = 8.0
# `autogluon@1.5.0` and `autogluon@1.6.3`, each in an environment of its own: the upgrade question
# ("did 1.6 make our models worse?") in one suite. Minutes to install: `make setup-frameworks`.
ENVIRONMENTS = (
    # 1.5.0 needs pyarrow<21 and scipy<1.17, older than the main environment's (pip's resolver).
    EnvironmentSpec("1.5.0", requirements=("autogluon.tabular[lightgbm,catboost]==1.5.0",),
                    imports=("autogluon.tabular",), match_main_libraries=False),
    EnvironmentSpec("1.6.3", requirements=("autogluon.tabular[lightgbm,catboost]==1.6.3",),
                    imports=("autogluon.tabular",)),
)


class AutoGluonModel(FittedModel):
    def __init__(self, predictor: Any, schema: FeatureSchema, task: TaskInfo) -> None:
        self.predictor = predictor
        self.schema = schema
        self.task = task

    def features(self, X: pd.DataFrame) -> pd.DataFrame:
        return text_as_strings(self.schema.apply(X), self.task)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.predictor.predict(self.features(X)))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        proba = self.predictor.predict_proba(self.features(X), as_multiclass=True)
        return proba_frame(proba.to_numpy(), list(proba.columns), self.task)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.predictor.path, model_dir / PREDICTOR_DIR, dirs_exist_ok=True)
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return len(self.predictor.model_names())

    def info(self) -> dict[str, Any]:
        # AutoGluon skips model families whose extras are missing without a word: record the
        # models it really trained.
        board = self.predictor.leaderboard(silent=True)
        return {
            "best_model": self.predictor.model_best,
            "leaderboard": board[["model", "score_val", "fit_time"]].to_dict(orient="records"),
        }


class AutoGluonAdapter(FrameworkAdapter):
    name = "autogluon"
    package = "autogluon.tabular"
    install_hint = "pip install 'autogluon.tabular[lightgbm,catboost]'"
    uses_gpu = True
    # Raw text columns stay strings: AutoGluon turns them into its own n-gram features.
    modalities = frozenset({"tabular", "multimodal", "text"})
    environments = ENVIRONMENTS

    def variant_params(self, variant: str) -> dict[str, Any]:
        if variant not in PRESETS:
            raise ValueError(f"autogluon has no variant '{variant}'; presets are: {', '.join(PRESETS)}")
        return {"presets": variant}

    def start(self, budget: Budget, workdir: Path) -> None:
        import autogluon.tabular  # noqa: F401 - seconds of imports belong to start-up, not to the search

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
    ) -> AutoGluonModel:
        from autogluon.tabular import TabularPredictor

        _, fit_params = split_params(params)
        # Text columns are kept (as strings): AutoGluon's feature generator detects them and adds
        # word n-gram counts and text statistics, no neural text model in the tabular presets.
        schema = FeatureSchema.learn(X, task, keep_text=True)
        train = text_as_strings(schema.apply(X), task)
        train[task.target] = y.to_numpy()
        predictor = TabularPredictor(
            label=task.target,
            problem_type=task.problem_type,
            eval_metric=EVAL_METRIC[task.metric],
            path=str(workdir / "autogluon"),
            verbosity=0,
        )
        options: dict[str, Any] = {
            "presets": "medium_quality",
            "time_limit": search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S),
            "num_cpus": budget.cores,
            "num_gpus": budget.gpus,
            "ag_args_fit": {"seed": seed},  # otherwise AutoGluon's models use their own fixed seed
        }
        predictor.fit(train, **{**options, **fit_params})
        return AutoGluonModel(predictor, schema, task)

    def load(self, model_dir: Path, task: TaskInfo) -> AutoGluonModel:
        from autogluon.tabular import TabularPredictor

        predictor = TabularPredictor.load(
            str(model_dir / PREDICTOR_DIR), verbosity=0, require_py_version_match=False
        )
        return AutoGluonModel(predictor, FeatureSchema.load(model_dir), task)

    def test_params(self) -> dict[str, Any]:
        return {"hyperparameters": {"GBM": {"num_boost_round": 10}}, "fit_weighted_ensemble": False}


ADAPTER = AutoGluonAdapter()
