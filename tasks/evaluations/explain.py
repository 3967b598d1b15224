"""Explanations of a job's saved model, computed by the harness for every framework the same way.

On the job's test fold, through the saved model's predict/predict_proba: permutation feature
importance (the drop of the suite metric's `result` per shuffled feature, over seeded shuffles,
with a confidence interval), SHAP values (the tree explainer where shap reads the fitted ensemble,
else the permutation explainer with a background sample from the training part), their fidelity
(PGI/PGU: the prediction gap when the top-k features are perturbed, against the bottom-k), and the
framework's own importance where the model offers one (AutoGluon's feature_importance, H2O's varimp).
A modality may bring its own explainer (tasks/evaluations/by_modality.py): text datasets are
explained at token level where the model offers its tokens (tfidf_logreg). What
a model offers is asked of it (tasks/frameworks/capabilities.py), never read from its name.
Stability across folds and seeds and agreement between frameworks are cross-job figures: the
report computes them from importance.csv.

Time: each part has a share of what is left of the block's `time_s` once the model and fold are
loaded; a part cut by it records how far it got and the evaluation is `partial`, never silently
truncated.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field

from tasks.evaluations import _attribution as attribution
from tasks.evaluations import _shap as shapley
from tasks.evaluations.base import (
    EvaluationContext,
    EvaluationResult,
    EvaluationSettings,
    EvaluationStatus,
    PostJobEvaluation,
)
from tasks.evaluations.by_modality import evaluations_of
from tasks.figures import Figure
from tasks.frameworks.capabilities import NotOffered

IMPORTANCE_FILE = "importance.csv"
SHAP_FILE = "shap_values.npz"
FRAMEWORK_IMPORTANCE_FILE = "framework_importance.csv"
TOKENS_FILE = "token_importance.csv"
# Shares of time_s at which each part must stop: permutation, then fidelity and SHAP, then the
# framework's own importance; the rest is left for writing the files.
PERMUTATION_SHARE, SHAP_SHARE, FRAMEWORK_SHARE = 0.5, 0.85, 0.95
FIDELITY_DRAWS = 3


class ExplainSettings(EvaluationSettings):
    time_s: int = Field(default=60, gt=0)
    rows: int = Field(default=200, gt=0)  # test rows SHAP explains
    background: int = Field(default=50, gt=0)  # training rows in SHAP's background sample
    repeats: int = Field(default=5, ge=2)  # seeded shuffles per feature
    max_rows: int = Field(default=2000, gt=0)  # test rows permutation importance scores on
    max_features: int = Field(default=200, gt=1)  # more features than this: not explained
    top_k: int = Field(default=3, gt=0)  # features perturbed by the fidelity check
    confidence: float = Field(default=0.95, gt=0, lt=1)
    seed: int = 0


class ExplainEvaluation(PostJobEvaluation):
    name = "explain"
    settings_model = ExplainSettings
    grace_s = 60.0  # loading the model (H2O's JVM) and the imports of shap
    figures: ClassVar[tuple[Figure, ...]] = (
        Figure("explain_features", "features explained (the dataset's tabular features)"),
        Figure("explain_perm_rows", "test rows permutation importance scored on (at most explain.max_rows)"),
        Figure("explain_perm_repeats", "seeded shuffles per feature that finished within the limit"),
        Figure("explain_perm_s", "wall time of permutation importance, seconds", "s"),
        Figure("explain_top_importance", "drop of `result` when the most important feature is shuffled"),
        Figure("explain_pgi", "fidelity: prediction gap when the top-k features (permutation ranking) are "
                              "perturbed"),
        Figure("explain_pgu", "fidelity: prediction gap when the bottom-k features are perturbed (lower is "
                              "better)"),
        Figure("explain_shap_rows", "test rows SHAP explained within the limit (at most explain.rows)"),
        Figure("explain_shap_s", "wall time of the SHAP explainer, seconds", "s"),
        Figure("explain_shap_pgi", "fidelity of the SHAP ranking: gap when its top-k features are "
                                   "perturbed"),
        Figure("explain_shap_pgu", "fidelity of the SHAP ranking: gap when its bottom-k features are "
                                   "perturbed"),
        Figure("explain_framework_s", "wall time of the framework's own importance, seconds", "s"),
        Figure("explain_tokens", "tokens with a SHAP value (text datasets, tfidf_logreg)"),
    )
    tags: ClassVar[dict[str, str]] = {
        "explain_shap_explainer": "which SHAP explainer ran: tree | permutation | text | none",
        "explain_framework_importance": "the framework's own importance recorded beside: autogluon "
                                        "feature_importance | h2o varimp | none",
    }

    def run(self, context: EvaluationContext) -> EvaluationResult:
        settings = context.settings
        assert isinstance(settings, ExplainSettings)  # the context holds this evaluation's own settings
        context.model, context.fold  # noqa: B018 - load both before the clock starts
        _start_clock(context)
        explainer = evaluations_of(context.spec.modality).explainer  # the modality's own (text's)
        if explainer is not None:
            return explainer(context)
        fold, spec = context.fold, context.spec
        text_columns = [c for c in fold.X_test.columns if spec.columns.get(c) == "text"]
        features = [c for c in fold.X_test.columns if spec.columns.get(c) not in ("text", "id", "ignore")]
        if len(features) < 2:
            return _not_explained(f"the dataset has {len(features)} tabular feature(s): importance and "
                                  "fidelity need at least 2 to rank")
        if len(features) > settings.max_features:
            return _not_explained(f"{len(features)} features is more than explain.max_features "
                                  f"({settings.max_features}) within time_s {settings.time_s}; raise both "
                                  "in the suite's explain block")
        return _explain_tabular(context, settings, features, text_columns)


EVALUATION = ExplainEvaluation()


def _not_explained(why: str) -> EvaluationResult:
    return EvaluationResult(status="not applicable", reason=f"not explained: {why}.",
                            tags={"explain_shap_explainer": "none", "explain_framework_importance": "none"})


_clock: dict[str, float] = {}  # when the explaining began and the seconds then left (one job per process)


def _start_clock(context: EvaluationContext) -> None:
    """Shares count from when the model and fold are loaded: a slow load (H2O's JVM) is not charged
    to one part more than another."""
    _clock["start"], _clock["left"] = time.monotonic(), max(0.0, context.time_left_s())


def _deadline(context: EvaluationContext, share: float) -> float:
    if not _clock:
        _start_clock(context)
    return _clock["start"] + _clock["left"] * share


def _predictor(context: EvaluationContext) -> attribution.Predict:
    model, classification = context.model, context.fold.task.is_classification

    def predict(X: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame | None]:
        if classification:
            proba = model.predict_proba(X)
            # The labels follow from the probabilities, as the worker scores them: one call, not two.
            return np.asarray(proba.columns, dtype=object)[proba.to_numpy().argmax(axis=1)], proba
        return np.asarray(model.predict(X)), None

    return predict


def _sample(frame: pd.DataFrame, rows: int, seed: int) -> pd.DataFrame:
    if len(frame) <= rows:
        return frame
    return frame.sample(n=rows, random_state=seed).sort_index()


def _explain_tabular(context: EvaluationContext, settings: ExplainSettings, features: list[str],
                     text_columns: list[str]) -> EvaluationResult:
    fold, folder = context.fold, context.folder
    predict = _predictor(context)
    X_test = _sample(fold.X_test, settings.max_rows, settings.seed)
    y_test = fold.y_test.loc[X_test.index]
    X_test, y_test = X_test.reset_index(drop=True), y_test.reset_index(drop=True)

    def score(predictions: np.ndarray, proba: pd.DataFrame | None) -> float:
        return context.score(predictions, proba, truth=y_test)["result"]

    if shapley.tree_route(context.model)[0] is None:
        shapley.compile_in_background()
    notes: list[str] = []
    if text_columns:
        notes.append(f"text columns not explained at feature level: {', '.join(text_columns)}")
    started = time.monotonic()
    permutation = attribution.permutation_importance(
        X_test, features, predict, score, repeats=settings.repeats, seed=settings.seed,
        deadline=_deadline(context, PERMUTATION_SHARE), confidence=settings.confidence)
    metrics: dict[str, float] = {
        "explain_features": float(len(features)),
        "explain_perm_rows": float(len(X_test)),
        "explain_perm_repeats": float(permutation.repeats_done),
        "explain_perm_s": time.monotonic() - started,
    }
    table = permutation.table.set_index("feature")
    if permutation.repeats_done:
        metrics["explain_top_importance"] = float(table["importance_mean"].max())
    else:
        notes.append(f"permutation importance: not one shuffle of each of the {len(features)} features fit "
                     f"in {PERMUTATION_SHARE:.0%} of time_s {settings.time_s}")
    if permutation.repeats_done and not permutation.complete:
        notes.append(f"permutation importance: {permutation.repeats_done} of {settings.repeats} shuffles "
                     f"per feature within the limit")

    # What is measured so far is on disk before SHAP starts: if a model call overruns the stage's
    # limit and the process is killed, the stage still finds it (its status becomes timeout).
    table.reset_index().to_csv(folder / IMPORTANCE_FILE, index=False)
    EvaluationResult(status="partial", reason="interrupted after permutation importance.",
                     metrics=dict(metrics), files=[IMPORTANCE_FILE]).save(folder)

    # Fidelity on the rows SHAP explains too: bounded, and the same rows for both rankings.
    X_rows = _sample(X_test, settings.rows, settings.seed)
    scale = 1.0 if fold.task.is_classification else float(pd.to_numeric(fold.y_train).std() or 1.0)
    if permutation.repeats_done:
        metrics.update(_fidelity(X_rows, table["importance_mean"], predict, settings, scale, "explain"))

    shap_started = time.monotonic()
    try:
        shap_values, explainer, shap_notes = _shap(context, settings, X_rows, features)
    except Exception as exc:  # noqa: BLE001 - the permutation importance already measured is kept
        shap_values, explainer = None, "none"
        first = str(exc).splitlines()[0][:300] if str(exc) else ""
        shap_notes = [f"SHAP failed: {type(exc).__name__}: {first}"]
    notes += shap_notes
    metrics["explain_shap_s"] = time.monotonic() - shap_started
    files = [IMPORTANCE_FILE]
    if shap_values is not None and len(shap_values.rows) < len(X_rows):
        notes.append(f"SHAP: {len(shap_values.rows)} of {len(X_rows)} rows within the limit")
    if shap_values is not None and len(shap_values.rows):
        metrics["explain_shap_rows"] = float(len(shap_values.rows))
        importance = shap_values.mean_abs()
        table["shap_mean_abs"] = importance
        table["shap_rank"] = importance.rank(ascending=False, method="min")
        _save_shap(folder / SHAP_FILE, shap_values, X_rows, predict)
        files.append(SHAP_FILE)
        if time.monotonic() < _deadline(context, SHAP_SHARE):
            metrics.update(_fidelity(X_rows, importance, predict, settings, scale, "explain_shap"))

    native_started = time.monotonic()
    native, native_kind, native_note = _framework_importance(context, X_test, y_test, features)
    if native_note:
        notes.append(native_note)
    if native is not None:
        metrics["explain_framework_s"] = time.monotonic() - native_started
        native.to_csv(folder / FRAMEWORK_IMPORTANCE_FILE, index=False)
        files.append(FRAMEWORK_IMPORTANCE_FILE)
        table["framework_importance"] = native.set_index("feature")["importance"].reindex(table.index)

    table.reset_index().to_csv(folder / IMPORTANCE_FILE, index=False)
    # A part cut by the limit, or one that failed, makes the whole partial (the rest still stands).
    cut = [n for n in notes if any(w in n for w in ("within the limit", "at the limit", "fit in", "failed"))]
    status: EvaluationStatus = "partial" if cut else "ok"
    return EvaluationResult(
        status=status, reason="; ".join(cut) + "." if cut else "", metrics=metrics, files=files,
        info={"notes": notes, "baseline_result": permutation.baseline_result,
              "top_features": list(permutation.table["feature"][:settings.top_k])},
        tags={"explain_shap_explainer": explainer, "explain_framework_importance": native_kind})


def _fidelity(X: pd.DataFrame, importance: pd.Series, predict: attribution.Predict,
              settings: ExplainSettings, scale: float, prefix: str) -> dict[str, float]:
    top, bottom = attribution.top_and_bottom(importance.dropna(), settings.top_k)
    return {
        f"{prefix}_pgi": attribution.prediction_gap(X, top, predict, seed=settings.seed,
                                                    draws=FIDELITY_DRAWS, scale=scale),
        f"{prefix}_pgu": attribution.prediction_gap(X, bottom, predict, seed=settings.seed,
                                                    draws=FIDELITY_DRAWS, scale=scale),
    }


def _shap(context: EvaluationContext, settings: ExplainSettings, X_rows: pd.DataFrame,
          features: list[str]) -> tuple[Any, str, list[str]]:
    """(ShapValues or None, which explainer ran, notes)."""
    notes: list[str] = []
    deadline = _deadline(context, SHAP_SHARE)
    if time.monotonic() >= deadline:
        return None, "none", ["SHAP: no time left within the limit"]
    route, why = shapley.tree_route(context.model)
    if route is not None:
        try:
            values = shapley.tree_values(route, X_rows[features], features)
            return shapley.ShapValues("tree", values, list(range(len(X_rows))), features), "tree", notes
        except Exception as exc:  # noqa: BLE001 - the model-agnostic explainer still answers
            why = f"tree explainer failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})"
    notes.append(f"SHAP permutation explainer: {context.job.framework}: {why}")
    predict = _predictor(context)
    background = _sample(context.fold.X_train[features], settings.background, settings.seed)

    def output(frame: pd.DataFrame) -> np.ndarray:
        return attribution.output_matrix(*predict(frame))

    if not shapley.wait_compiled(deadline):
        notes.append("SHAP: shap's permutation explainer was still compiling its kernels (numba) at the "
                     "limit; raise explain.time_s")
        return None, "none", notes
    # One row's worth of model calls, timed first: a model too slow for even one row is said so.
    cost = shapley.row_cost_s(output, background, len(features))
    left = deadline - time.monotonic()
    if cost > left:
        notes.append(f"SHAP: one row needs about {cost:.0f} s of model calls, more than the {left:.0f} s "
                     "left within the limit (lower explain.background or raise time_s)")
        return None, "none", notes
    values, done = shapley.permutation_values(output, X_rows[features], background,
                                                  seed=settings.seed, deadline=deadline)
    return shapley.ShapValues("permutation", values, list(range(done)), features), "permutation", notes


def _save_shap(path: Any, values: Any, X_rows: pd.DataFrame, predict: attribution.Predict) -> None:
    """One output per row, compact: the predicted class's values (positive class for binary), float32."""
    rows = X_rows.iloc[values.rows]
    matrix = values.values
    if matrix.shape[2] == 1:
        chosen = np.zeros(len(rows), dtype=int)
    elif matrix.shape[2] == 2:
        chosen = np.ones(len(rows), dtype=int)
    else:
        chosen = attribution.output_matrix(*predict(rows)).argmax(axis=1)
    picked = matrix[np.arange(len(rows)), :, chosen]
    data = np.column_stack([_as_numbers(rows[feature]) for feature in values.features])
    np.savez_compressed(path, values=picked.astype(np.float32), data=data.astype(np.float32),
                        features=np.asarray(values.features, dtype=str),
                        explainer=np.asarray(values.explainer, dtype=str))


def _as_numbers(column: pd.Series) -> np.ndarray:
    """A feature's values for the summary plot's colour: numbers as they are, categories as codes."""
    if pd.api.types.is_numeric_dtype(column.dtype) and not isinstance(column.dtype, pd.CategoricalDtype):
        return pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
    codes = pd.Series(pd.Categorical(column).codes, dtype=float)
    return codes.where(codes >= 0).to_numpy()


def _framework_importance(context: EvaluationContext, X: pd.DataFrame, y: pd.Series,
                          features: list[str]) -> tuple[pd.DataFrame | None, str, str]:
    """(feature, importance[, stddev, p_value]) from the framework itself, its kind, and a note."""
    model, framework = context.model, context.job.framework
    if model.native_importance_kind is None:
        return None, "none", ""
    left = _deadline(context, FRAMEWORK_SHARE) - time.monotonic()
    if left < 2:
        return None, "none", f"{framework}'s own importance: no time left within the limit"
    try:
        offered = model.native_importance(X, y, left)
    except NotOffered as exc:
        return None, "none", f"{framework}'s own importance: {exc}"
    except Exception as exc:  # noqa: BLE001 - the harness's own figures stand without it
        return None, "none", f"{framework}'s own importance failed: {type(exc).__name__}: {exc}"[:300]
    return offered.table, offered.kind, ""


# ---------------------------------------------------------------- text: token level


def explain_text(context: EvaluationContext) -> EvaluationResult:
    """Token-level SHAP of a text dataset's one text column (the text modality's explainer)."""
    settings = context.settings
    assert isinstance(settings, ExplainSettings)  # the context holds this evaluation's own settings
    texts = [c for c in context.fold.X_test.columns if context.spec.columns.get(c) == "text"]
    try:
        token_split = context.model.text_tokens()
    except NotOffered as exc:
        return _not_explained(f"{context.job.framework} on text: {exc}")
    if len(texts) != 1 or len(context.fold.X_test.columns) != 1:
        return _not_explained("token-level SHAP takes a dataset with exactly one text column and no "
                              f"other feature; this one has {list(context.fold.X_test.columns)}")
    import shap

    column = texts[0]
    model, classification = context.model, context.fold.task.is_classification
    X_rows = _sample(context.fold.X_test, min(settings.rows, 50), settings.seed).reset_index(drop=True)

    def output(strings: Any) -> np.ndarray:
        frame = pd.DataFrame({column: [str(s) for s in strings]})
        if classification:
            return model.predict_proba(frame).to_numpy(dtype=float)
        return np.asarray(model.predict(frame), dtype=float).reshape(-1, 1)

    explainer = shap.explainers.Partition(output, shap.maskers.Text(token_split))
    deadline = _deadline(context, SHAP_SHARE)
    started = time.monotonic()
    totals: dict[str, list[float]] = {}
    done = 0
    for text in X_rows[column].fillna("").astype(str):
        if time.monotonic() >= deadline:
            break
        explanation = explainer([text], max_evals=100, silent=True)
        values = np.abs(np.asarray(explanation.values[0], dtype=float))
        values = values.sum(axis=1) if values.ndim == 2 else values
        for token, value in zip(explanation.data[0], values, strict=True):
            key = str(token).strip().lower()
            if key:
                totals.setdefault(key, []).append(float(value))
        done += 1
    table = pd.DataFrame([(t, float(np.mean(v)), len(v)) for t, v in totals.items()],
                         columns=["token", "shap_mean_abs", "count"]).sort_values("shap_mean_abs",
                                                                                   ascending=False)
    table.to_csv(context.folder / TOKENS_FILE, index=False)
    cut = done < len(X_rows)
    return EvaluationResult(
        status="partial" if cut else "ok",
        reason=f"SHAP: {done} of {len(X_rows)} texts within the limit." if cut else "",
        metrics={"explain_shap_rows": float(done), "explain_shap_s": time.monotonic() - started,
                 "explain_tokens": float(len(table))},
        files=[TOKENS_FILE], info={"top_tokens": list(table["token"][:10])},
        tags={"explain_shap_explainer": "text", "explain_framework_importance": "none"})
