"""AutoGluon TabularPredictor. Variants are presets: `autogluon:best_quality`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._sampling import PARAM as ROWS_PARAM
from tasks.frameworks._sampling import RowCap, Sampled
from tasks.frameworks._tabular import FeatureSchema, proba_frame, search_seconds, text_as_strings
from tasks.frameworks.base import (
    FittedModel,
    FrameworkAdapter,
    NoModelTrained,
    TaskInfo,
    preset_params,
    split_params,
)
from tasks.frameworks.capabilities import AnytimeCandidate, NativeImportance, NotOffered, OnnxCompiled
from tasks.frameworks.environments import EnvironmentSpec
from tasks.metric_registry import AUTOGLUON, framework_name
from tasks.specs import Budget

PREDICTOR_DIR = "predictor"
COMPILED_DIR = "autogluon_compiled"  # the predictor's copy that compile() turns into ONNX
PRESETS = ("medium_quality", "good_quality", "high_quality", "best_quality", "extreme_quality",
           "optimize_for_deployment", "interpretable")
# AutoGluon finishes its current model and the ensemble after time_limit; leave it that room.
# Measured on a loaded 2-core machine: time_limit 17 s gave a 28 s fit.
TIME_LIMIT_SHARE = 0.85
TIME_RESERVE_S = 8.0
# For data too large for the time or memory it has, AutoGluon's own advice is to subsample it.
# Measured on a 2-core machine at 9 M rows x 29 columns (1m2c): its preprocessing alone took over
# a minute and 10 GB before any model was trained; on a 2 M-row sample of the same rows it
# preprocessed in 20 s and trained LightGBM in 31 s. So it is fitted on at most this many cells
# (rows x columns) per core and minute of the budget's time_s ...
CELLS_PER_CORE_MINUTE = 30_000_000
# ... and on at most as many rows as fit the budget's memory_mb, its peak being about this many
# times the in-memory size of the rows it is given (measured: about 5 at 9 M rows).
PEAK_MEMORY_PER_DATA = 6
ROW_CAP = RowCap("autogluon", CELLS_PER_CORE_MINUTE, PEAK_MEMORY_PER_DATA)
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
    native_importance_kind = "autogluon feature_importance"

    def __init__(self, predictor: Any, schema: FeatureSchema, task: TaskInfo,
                 sampled: Sampled | None = None) -> None:
        self.predictor = predictor
        self.schema = schema
        self.task = task
        self.sampled = sampled  # when fitted on a sample

    def features(self, X: pd.DataFrame) -> pd.DataFrame:
        return text_as_strings(self.schema.apply(X), self.task)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.predictor.predict(self.features(X)))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        proba = self.predictor.predict_proba(self.features(X), as_multiclass=True)
        return proba_frame(proba.to_numpy(), list(proba.columns), self.task)

    def _output(self, X: pd.DataFrame) -> np.ndarray:
        if self.task.is_classification:
            return self.predict_proba(X).to_numpy(dtype=float)
        return np.asarray(self.predict(X), dtype=float).reshape(-1, 1)

    def to_onnx(self, folder: Path) -> OnnxCompiled:
        """AutoGluon's compile() (ONNX for RF, XT and NN_TORCH) of the best model's lineage, on a copy."""
        predictor = self.predictor
        best = predictor.model_best
        trainer = predictor._trainer  # the lineage of the best model is only known to the trainer
        blockers = []
        for name in trainer.get_minimum_model_set(best):
            model = trainer.load_model(name)
            if "WeightedEnsemble" in type(model).__name__:
                continue  # a weighted sum of its members' outputs: nothing to compile
            if not model.can_compile({"compiler": "onnx"}):
                blockers.append(f"{name} ({type(model).__name__})")
        if blockers:
            raise NotOffered("AutoGluon's compile() takes RF, XT and NN_TORCH models only; the best "
                             f"model {best} needs {', '.join(blockers)}")
        copy_dir = folder / COMPILED_DIR
        if copy_dir.exists():
            shutil.rmtree(copy_dir)
        clone = predictor.clone(str(copy_dir), return_clone=True)
        try:
            clone.compile(models=[best], with_ancestors=True)
        except Exception as exc:  # noqa: BLE001 - the compiler's verdict
            raise NotOffered(f"AutoGluon compile() failed: {type(exc).__name__}: {exc}"[:400]) from None
        compiled = AutoGluonModel(clone, self.schema, self.task)
        graphs = sorted(copy_dir.rglob("*.onnx"))
        return OnnxCompiled(compiled._output, graphs,
                            f"AutoGluon's {best} with its lineage compiled to ONNX ({len(graphs)} graph(s))",
                            scratch=copy_dir)

    def native_importance(self, X: pd.DataFrame, y: pd.Series, time_limit_s: float) -> NativeImportance:
        data = self.features(X)
        data[self.task.target] = y.to_numpy()
        board = self.predictor.feature_importance(data, time_limit=time_limit_s, num_shuffle_sets=3,
                                                  silent=True)
        table = board.reset_index().rename(columns={"index": "feature"})
        return NativeImportance(self.native_importance_kind or "",
                                table[["feature", "importance", "stddev", "p_value"]])

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.predictor.path, model_dir / PREDICTOR_DIR, dirs_exist_ok=True)
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return len(self.predictor.model_names())

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def anytime_candidates(self) -> list[AnytimeCandidate]:
        """Each model of the leaderboard, ready at the sum of the fit times of the models fitted up to
        it (fit_order); AutoGluon returns the best by score_val (higher is better in its own sign)."""
        predictor = self.predictor
        board = predictor.leaderboard(silent=True)
        if "fit_order" not in board:
            raise NotOffered("this AutoGluon leaderboard has no fit_order, so the models' order is unknown")
        board = board.sort_values("fit_order")
        ready = board["fit_time"].fillna(0.0).cumsum()
        best = predictor.model_best
        candidates = []

        def predict(name: str) -> Callable[[pd.DataFrame], np.ndarray]:
            return lambda X: np.asarray(predictor.predict(self.features(X), model=name))

        def predict_proba(name: str) -> Callable[[pd.DataFrame], pd.DataFrame]:
            return lambda X: self._model_proba(X, name)

        for row, ready_s in zip(board.itertuples(), ready, strict=True):
            name = str(row.model)
            candidates.append(AnytimeCandidate(
                name=name, ready_s=float(ready_s),
                validation=float(row.score_val) if pd.notna(row.score_val) else None,
                predict=predict(name),
                predict_proba=predict_proba(name) if self.task.is_classification else None,
                final=name == best,
                timing="cumulative fit_time in AutoGluon's fit_order (its overhead between models not "
                       "counted)",
            ))
        return candidates

    def _model_proba(self, X: pd.DataFrame, name: str) -> pd.DataFrame:
        proba = self.predictor.predict_proba(self.features(X), model=name, as_multiclass=True)
        return proba_frame(proba.to_numpy(), list(proba.columns), self.task)

    def info(self) -> dict[str, Any]:
        # AutoGluon skips model families whose extras are missing without a word: record the
        # models it really trained.
        board = self.predictor.leaderboard(silent=True)
        recorded: dict[str, Any] = {
            "best_model": self.predictor.model_best,
            "leaderboard": board[["model", "score_val", "fit_time"]].to_dict(orient="records"),
        }
        if self.sampled:
            recorded["sampled"] = self.sampled.sentence()
        return recorded


class AutoGluonAdapter(FrameworkAdapter):
    name = "autogluon"
    metric_names = AUTOGLUON  # the suite metric in its own names, from tasks/metric_registry.py
    package = "autogluon.tabular"
    install_hint = "pip install 'autogluon.tabular[lightgbm,catboost]'"
    serving_packages = ("lightgbm", "catboost", "xgboost", "xgboost-cpu")
    uses_gpu = True
    # Raw text columns stay strings: AutoGluon turns them into its own n-gram features.
    modalities = frozenset({"tabular", "multimodal", "text"})
    environments = ENVIRONMENTS

    def variant_params(self, variant: str) -> dict[str, Any]:
        return preset_params(self.name, variant, PRESETS)

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, _ = split_params(params)
        ROW_CAP.check(adapter_params.get(ROWS_PARAM))

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

        adapter_params, fit_params = split_params(params)
        # Text columns are kept (as strings): AutoGluon's feature generator detects them and adds
        # word n-gram counts and text statistics, no neural text model in the tabular presets.
        schema = FeatureSchema.learn(X, task, keep_text=True)
        X, y, sampled = ROW_CAP.sample(X, y, budget, adapter_params, seed, stratify=task.is_classification)
        train = text_as_strings(schema.apply(X), task)
        train[task.target] = y.to_numpy()
        predictor = TabularPredictor(
            label=task.target,
            problem_type=task.problem_type,
            eval_metric=framework_name(task.metric, AUTOGLUON),
            path=str(workdir / "autogluon"),
            verbosity=0,
        )
        options: dict[str, Any] = {
            "presets": "medium_quality",
            "time_limit": search_seconds(budget.time_s, TIME_LIMIT_SHARE, TIME_RESERVE_S),
            "num_cpus": budget.cores,
            "num_gpus": budget.gpus,
            # The budget's memory, as AutoGluon's own (soft) limit: it then skips or stops a model
            # it expects to exceed it instead of being killed by the watchdog mid-search. It counts
            # this whole process, the harness's copy of the fold too, so it errs on the safe side.
            "memory_limit": budget.memory_mb / 1024,
            "ag_args_fit": {"seed": seed},  # otherwise AutoGluon's models use their own fixed seed
        }
        try:
            predictor.fit(train, **{**options, **fit_params})
        except AssertionError as exc:
            # AutoGluon's way of saying its time ran out before its first model: "Not enough time
            # left to train models".
            if "not enough time" in str(exc).lower():
                raise NoModelTrained(self.name, budget.time_s, len(train)) from exc
            raise
        return AutoGluonModel(predictor, schema, task, sampled)

    def load(self, model_dir: Path, task: TaskInfo) -> AutoGluonModel:
        from autogluon.tabular import TabularPredictor

        predictor = TabularPredictor.load(
            str(model_dir / PREDICTOR_DIR), verbosity=0, require_py_version_match=False
        )
        return AutoGluonModel(predictor, FeatureSchema.load(model_dir), task)

    def test_params(self) -> dict[str, Any]:
        return {"hyperparameters": {"GBM": {"num_boost_round": 10}}, "fit_weighted_ensemble": False}


ADAPTER = AutoGluonAdapter()
