"""FLAML AutoML: a cost-frugal search over LightGBM, XGBoost, forests and more.

Score over time: FLAML writes each improvement of its best to its search log (``log_file_name``;
read with FLAML's own ``training_log_reader``): when, by which learner and config, on how many rows,
at which validation loss. It keeps no trained model of those earlier trials unless a suite sets
``model_history: true`` (FLAML warns that it costs memory and time), and then only each learner's
last best, trained as in the search. A point's model is the one FLAML would have returned had its
search stopped there: the logged config refitted with FLAML's ``retrain_from_log`` on every row, as
FLAML retrains its pick (``retrain_full``, on by default here); with ``retrain_full: false`` FLAML
returns the search's own model, so a kept one serves as it is and the others are refitted on the
search's rows (``train_full=False``, the same split and sample: the trial's model again for
deterministic learners). Each point of anytime.csv says which in its ``source`` column.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks._onnx import float_matrix, sklearn_graph
from tasks.frameworks._sampling import PARAM as ROWS_PARAM
from tasks.frameworks._sampling import RowCap, Sampled
from tasks.frameworks._tabular import FeatureSchema, proba_frame, search_seconds
from tasks.frameworks.base import FittedModel, FrameworkAdapter, NoModelTrained, TaskInfo, split_params
from tasks.frameworks.capabilities import AnytimeCandidate, NotOffered, OnnxGraph, TreeEnsemble, not_offered
from tasks.metric_registry import FLAML, framework_name
from tasks.specs import Budget

AUTOML_FILE = "automl.pkl"  # FLAML's own way to persist a fitted AutoML object
# FLAML stops starting trials at time_budget but finishes the running one and refits the best.
# Measured on a loaded 2-core machine: time_budget 17 s gave a 26 s fit.
TIME_BUDGET_SHARE = 0.85
TIME_RESERVE_S = 8.0
# FLAML's own default list without CatBoost: FLAML cannot stop a running trial, and one CatBoost
# trial (cross-validated, thousands of rounds on one core) ran past the job's hard limit on a
# 344-row dataset. A suite can still ask for it with `estimator_list`.
ESTIMATORS = ["lgbm", "xgboost", "xgb_limitdepth", "rf", "extra_tree"]
TREE_ESTIMATORS = ("lgbm", "xgboost", "xgb_limitdepth", "rf", "extra_tree")  # shap reads their trees
BOOSTERS = ("lgbm", "xgboost", "xgb_limitdepth")  # converted by onnxmltools, the rest by skl2onnx
# FLAML samples rows for its own trials (`sample`), but its preprocessing, holdout split and
# first trials all run on every row it is given: at 9 M rows x 19 columns under 1m2c it trained
# nothing in its 51 s. So it is fitted on at most this many cells (rows x columns) per core and
# minute of the budget's time_s (about 670,000 rows of 30 columns at 1m2c) ...
CELLS_PER_CORE_MINUTE = 10_000_000
# ... and on as many rows as fit the budget's memory_mb, its peak being about this many times the
# in-memory size of the rows it is given (its transformer and holdout split copy them).
PEAK_MEMORY_PER_DATA = 6
ROW_CAP = RowCap("flaml", CELLS_PER_CORE_MINUTE, PEAK_MEMORY_PER_DATA)
SEARCH_LOG = "flaml.log"  # in the job's work folder: FLAML's record of each improvement of its best
# The fit options a refit from the log repeats, so FLAML splits and samples the rows as it did.
REFIT_OPTIONS = ("task", "time_budget", "eval_method", "split_ratio", "n_splits", "split_type", "n_jobs")
REFITTED = "refitted from FLAML's log on every row, as FLAML retrains its pick (retrain_from_log, train_full)"
REFITTED_SEARCH_ROWS = "refitted from FLAML's log on the search's rows (retrain_from_log, not train_full)"
KEPT = "kept by FLAML (model_history): the learner's best model of the search"
TIMING = "FLAML's wall_clock_time of the logged trial, plus the adapter's seconds before FLAML's fit began"


@dataclass(frozen=True)
class FlamlSearch:
    """What a fitted model needs to give its search's progress: FLAML's log, the rows and options
    FLAML was fitted with (a refit repeats them), and when FLAML's clock began in the adapter's fit."""

    log: Path | None
    X: pd.DataFrame  # as FLAML was given them
    y: pd.Series
    options: dict[str, Any]
    started_s: float


class FlamlModel(FittedModel):
    def __init__(self, automl: Any, schema: FeatureSchema, task: TaskInfo,
                 sampled: Sampled | None = None, search: FlamlSearch | None = None) -> None:
        self.automl = automl
        self.schema = schema
        self.task = task
        self.sampled = sampled  # when fitted on a sample
        self.search = search  # only on a model just fitted (a loaded one has no search)

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self.automl.predict(self.schema.apply(X)))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        if not self.task.is_classification:
            raise NotImplementedError("regression models have no class probabilities")
        matrix = self.automl.predict_proba(self.schema.apply(X))
        return proba_frame(np.asarray(matrix), list(self.automl.classes_), self.task)

    def anytime_candidates(self) -> list[AnytimeCandidate]:
        """One candidate per logged improvement of FLAML's best, then the model the job returned."""
        from flaml.automl.training_log import training_log_reader

        search = self.search
        if search is None:
            raise NotOffered("a FLAML model loaded from its folder has no search log; the curve is "
                             "recorded when the job fits it")
        if search.log is None or not search.log.is_file():
            raise NotOffered("FLAML wrote no search log (its `log_file_name` was set empty), so its "
                             "progress is unknown")
        with training_log_reader(str(search.log)) as reader:
            records = [record for record in reader.records() if math.isfinite(record.validation_loss)]
        if not records:
            raise NotOffered("FLAML's search log holds no trial with a validation score")
        classification = self.task.is_classification
        # FLAML retrains its pick on every row unless told not to ("budget": when time allows, which
        # it does at any earlier stop); without that it returns the search's own model.
        retrains = search.options.get("retrain_full", True) is not False
        live: dict[str, _Refit] = {}  # the one refit held at a time (each holds FLAML's data copies)
        candidates = []
        predict: Callable[[pd.DataFrame], np.ndarray]
        proba: Callable[[pd.DataFrame], pd.DataFrame]
        for record in records:
            kept = None if retrains else self._kept_model(record)
            if kept is not None:
                predict, proba, source, cost_s = (partial(self._kept_predict, kept),
                                                  partial(self._kept_proba, kept), KEPT, 0.0)
            else:
                refit = _Refit(self, record.record_id, train_full=retrains, live=live)
                predict, proba = refit.predict, refit.predict_proba
                source = REFITTED if retrains else REFITTED_SEARCH_ROWS
                cost_s = record.trial_time
            candidates.append(AnytimeCandidate(
                name=f"{record.learner}#{record.record_id}",
                ready_s=search.started_s + record.wall_clock_time,
                validation=-float(record.validation_loss), predict=predict,
                predict_proba=proba if classification else None, timing=TIMING, source=source,
                cost_s=float(cost_s)))
        last = max(records, key=lambda record: record.wall_clock_time)
        candidates.append(AnytimeCandidate(
            name=f"{self.automl.best_estimator} (returned)", ready_s=search.started_s + last.wall_clock_time,
            validation=-float(self.automl.best_loss), predict=self.predict,
            predict_proba=self.predict_proba if classification else None, final=True, timing=TIMING,
            source="the job's model (FLAML's best config, retrained as its retrain_full says)"))
        return candidates

    def _kept_model(self, record: Any) -> Any | None:
        """The trained model FLAML kept for this logged trial, or None. FLAML keeps one per learner
        (its best) and only with model_history; for the best learner it keeps the final refit instead."""
        automl = self.automl
        if record.learner == automl.best_estimator:
            return None
        config = {k: v for k, v in (record.config or {}).items() if k not in ("learner", "_choice_")}
        if (automl.best_config_per_estimator.get(record.learner) != config
                or automl.best_loss_per_estimator.get(record.learner) != record.validation_loss):
            return None
        estimator = automl.best_model_for_estimator(record.learner)
        # Without model_history FLAML returns the learner untrained (its model cleaned up).
        return estimator if getattr(estimator, "model", None) is not None else None

    def _task_input(self, X: pd.DataFrame) -> Any:
        """X as FLAML's learners read it (its AutoML.predict does the same before the estimator)."""
        return self.automl._state.task.preprocess(self.schema.apply(X), self.automl._transformer)

    def _kept_predict(self, estimator: Any, X: pd.DataFrame) -> np.ndarray:
        automl = self.automl
        raw = np.asarray(estimator.predict(self._task_input(X)))
        if automl._label_transformer:  # FLAML's AutoML.predict does the same
            return np.asarray(automl._label_transformer.inverse_transform(pd.Series(raw.astype(int))))
        return raw

    def _kept_proba(self, estimator: Any, X: pd.DataFrame) -> pd.DataFrame:
        automl = self.automl
        matrix = estimator.predict_proba(self._task_input(X))
        return proba_frame(np.asarray(matrix), list(automl.classes_), self.task)

    def _prepare(self, X: pd.DataFrame) -> Any:
        """X as FLAML's final estimator reads it: FLAML keeps its preprocessing on its wrappers."""
        automl = self.automl
        return automl._trained_estimator._preprocess(self._task_input(X))

    def tree_ensemble(self) -> TreeEnsemble:
        best = self.automl.best_estimator
        if best not in TREE_ESTIMATORS:
            raise NotOffered(f"FLAML picked '{best}', not a tree ensemble")
        if self.schema.levels:
            raise NotOffered("FLAML's model sees categorical features through its own encoding")
        estimator = self.automl._trained_estimator.estimator
        names = getattr(estimator, "feature_names_in_", None)
        columns = [str(c) for c in (self.schema.columns if names is None else names)]
        return TreeEnsemble(estimator, self._prepare, columns)

    def to_onnx(self, folder: Path) -> OnnxGraph:
        automl, task = self.automl, self.task
        best = automl.best_estimator
        estimator = automl._trained_estimator.estimator
        if self.schema.levels:
            raise NotOffered(f"FLAML's {best} reads categorical features through its own encoding, which "
                             "the converters here do not take")
        covers = f"FLAML's final {best} model (FLAML's column preprocessing stays in Python)"
        classes = list(automl.classes_) if task.is_classification else []
        if best not in BOOSTERS:
            converted = sklearn_graph(estimator, self.schema, task, covers=covers,
                                      prepare=lambda X: pd.DataFrame(self._prepare(X)))
            # FLAML fits its scikit-learn models on encoded labels; its classes_ are the labels, in order.
            converted.classes = classes
            return converted
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        inputs = [("X", FloatTensorType([None, len(self.schema.columns)]))]
        try:
            # onnxmltools picks the highest opset it supports (15 for LightGBM in 1.16).
            if best == "lgbm":
                graph = onnxmltools.convert_lightgbm(estimator, initial_types=inputs, zipmap=False)
            else:
                graph = onnxmltools.convert_xgboost(estimator, initial_types=inputs)
        except Exception as exc:  # noqa: BLE001 - the converter's verdict on this model
            raise not_offered(exc) from None

        def feed(X: pd.DataFrame) -> dict[str, np.ndarray]:
            return {"X": float_matrix(pd.DataFrame(self._prepare(X)))}

        return OnnxGraph(graph, feed, 1 if task.is_classification else 0, classes, covers)

    def save(self, model_dir: Path) -> None:
        model_dir.mkdir(parents=True, exist_ok=True)
        with open(model_dir / AUTOML_FILE, "wb") as handle:
            pickle.dump(self.automl, handle, pickle.HIGHEST_PROTOCOL)
        self.schema.save(model_dir)

    @property
    def models_count(self) -> int:
        return max(1, len(self.automl.config_history))  # trials FLAML evaluated

    @property
    def fit_rows(self) -> int | None:
        return self.sampled.rows if self.sampled else None

    def info(self) -> dict[str, Any]:
        recorded: dict[str, Any] = {
            "best_estimator": self.automl.best_estimator,
            "best_config": self.automl.best_config,
            "trials": len(self.automl.config_history),
        }
        if self.sampled:
            recorded["sampled"] = self.sampled.sentence()
        return recorded


class _Refit:
    """A logged trial of the search, refitted with FLAML's retrain_from_log on first use. The harness
    scores candidates one after another, so a refit lets go of the one before it (`live`)."""

    def __init__(self, model: FlamlModel, record_id: int, train_full: bool, live: dict[str, _Refit]) -> None:
        self.model = model
        self.record_id = record_id
        self.train_full = train_full
        self.live = live
        self.automl: Any = None

    def _fitted(self) -> Any:
        previous = self.live.get("refit")
        if previous is not None and previous is not self:
            previous.automl = None
        self.live["refit"] = self
        if self.automl is None:
            from flaml import AutoML

            search = self.model.search
            assert search is not None and search.log is not None  # noqa: S101 - built only with one
            options = {name: search.options[name] for name in REFIT_OPTIONS if name in search.options}
            automl = AutoML(seed=search.options.get("seed"))
            flaml_logger = logging.getLogger("flaml.automl.logger")
            level = flaml_logger.level
            flaml_logger.setLevel(logging.WARNING)  # retrain_from_log says each step at INFO
            try:
                automl.retrain_from_log(str(search.log), search.X, search.y, record_id=self.record_id,
                                        train_full=self.train_full, **options)
            finally:
                flaml_logger.setLevel(level)
            self.automl = automl
        return self.automl

    def predict(self, X: pd.DataFrame) -> np.ndarray:
        return np.asarray(self._fitted().predict(self.model.schema.apply(X)))

    def predict_proba(self, X: pd.DataFrame) -> pd.DataFrame:
        automl = self._fitted()
        matrix = automl.predict_proba(self.model.schema.apply(X))
        return proba_frame(np.asarray(matrix), list(automl.classes_), self.model.task)


class FlamlAdapter(FrameworkAdapter):
    name = "flaml"
    metric_names = FLAML  # the suite metric in its own names, from tasks/metric_registry.py
    package = "flaml"
    install_hint = "pip install 'flaml[automl]' xgboost-cpu"
    serving_packages = ("lightgbm", "xgboost", "xgboost-cpu", "catboost")

    def unavailable_reason(self) -> str | None:
        reason = super().unavailable_reason()
        if reason is None and importlib.util.find_spec("xgboost") is None:
            # flaml.automl imports xgboost at import time even when it is not searched.
            return f"FLAML's AutoML needs XGBoost, which is missing; install it with: {self.install_hint}"
        return reason

    def check_params(self, params: dict[str, Any]) -> None:
        adapter_params, _ = split_params(params)
        ROW_CAP.check(adapter_params.get(ROWS_PARAM))

    def start(self, budget: Budget, workdir: Path) -> None:
        import flaml  # noqa: F401 - a few seconds of imports belong to start-up, not to the search

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
    ) -> FlamlModel:
        from flaml import AutoML

        fit_started = time.perf_counter()
        adapter_params, fit_params = split_params(params)
        schema = FeatureSchema.learn(X, task)
        X, y, sampled = ROW_CAP.sample(X, y, budget, adapter_params, seed, stratify=task.is_classification)
        automl = AutoML()
        options: dict[str, Any] = {
            "task": "classification" if task.is_classification else "regression",
            "estimator_list": ESTIMATORS + (["lrl1"] if task.is_classification else []),
            "metric": framework_name(task.metric, FLAML),
            "time_budget": search_seconds(budget.time_s, TIME_BUDGET_SHARE, TIME_RESERVE_S),
            "n_jobs": budget.cores,
            "seed": seed,
            # Refit the best config on all the data only if that fits in the budget.
            "retrain_full": "budget",
            "verbose": 0,
            "log_file_name": str(workdir / SEARCH_LOG),
        }
        options = {**options, **fit_params}
        frame = schema.apply(X)
        search_started_s = time.perf_counter() - fit_started
        automl.fit(X_train=frame, y_train=y, **options)
        if automl.best_estimator is None or automl.model is None:
            # FLAML only warns ("No estimator is trained") and its predict then answers None.
            raise NoModelTrained(self.name, budget.time_s, len(X))
        log = Path(options["log_file_name"]) if options.get("log_file_name") else None
        search = FlamlSearch(log, frame, y, options, search_started_s)
        return FlamlModel(automl, schema, task, sampled, search)

    def load(self, model_dir: Path, task: TaskInfo) -> FlamlModel:
        with open(model_dir / AUTOML_FILE, "rb") as handle:
            automl = pickle.load(handle)  # noqa: S301 - our own model folder
        return FlamlModel(automl, FeatureSchema.load(model_dir), task)

    def test_params(self) -> dict[str, Any]:
        return {"estimator_list": ["lgbm"], "max_iter": 3}


ADAPTER = FlamlAdapter()
