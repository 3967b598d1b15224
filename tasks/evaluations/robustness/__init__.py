"""Robustness by mutation testing: the saved model scored on corrupted copies of its test fold.

Per corruption a degradation curve over severity (presets, then bisection towards the breaking
point), then single (column x corruption) cells until the suite's coverage minimum or the time
limit. Every case is scored by the harness (`context.score`); a model that raises or returns
garbage on a case is a robustness failure, scored as the constant predictor and counted.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

import tasks.evaluations.robustness.replay as replay  # the module: its names (load, save) are generic
from tasks.errors import UserError
from tasks.evaluations.base import EvaluationContext, EvaluationResult, EvaluationSettings, PostJobEvaluation
from tasks.evaluations.by_modality import ModalityEvaluations, evaluations_of
from tasks.evaluations.robustness.adversarial import (
    AttackOutcome,
    AttackSettings,
    attack_rows,
    class_probabilities,
    decide,
)
from tasks.evaluations.robustness.corruptions import CORRUPTIONS, FrameFacts, condition_column, corrupt
from tasks.evaluations.robustness.gradient import GradientSettings, PixelOutcome, noise_cases, pixel_attacks
from tasks.evaluations.robustness.images import IMAGE_FAMILY
from tasks.evaluations.robustness.images import preload as preload_image_transforms
from tasks.evaluations.robustness.replay import ReplayCase, replay_path
from tasks.evaluations.robustness.search import (
    BUILD_ERROR,
    CURVE_PHASES,
    FRAME,
    Case,
    SearchSettings,
    degradation,
    search,
)
from tasks.evaluations.robustness.signals import (
    Observation,
    activation_coverage,
    anomaly_capture,
    boundary_density,
)
from tasks.evaluations.robustness.space import FeatureSpace
from tasks.evaluations.robustness.steering import (
    AnomalySettings,
    AnomalySteer,
    BoundarySteer,
    SteerSettings,
    steer_jointly,
)
from tasks.figures import Figure
from tasks.frameworks.capabilities import NotOffered, TorchNetwork
from tasks.frameworks.registry import get_adapter
from tasks.specs import DatasetSpec

CASES_FILE = "cases.csv"
ADVERSARIAL_FILE = "adversarial.csv"
STEERED_FILE = "steered_cases.csv"  # the anomaly steering's cases (apart from the curves' cases.csv)
# Share of time_s kept from the attack for the steering (which stops RESERVE_S before the end).
STEER_SHARE = 0.1
# Seconds the boundary search needs to be worth starting: importing ART (it imports torch) and one row.
ATTACK_START_S = 8.0
DEFAULT_CORRUPTIONS = [name for name, c in CORRUPTIONS.items() if not c.unavailable] + [
    name for name, c in CORRUPTIONS.items() if c.unavailable]
FAMILIES = sorted({c.family for c in CORRUPTIONS.values()})
# Seconds kept back from time_s for writing the table and the result.
RESERVE_S = 2.0
# The floor of the curve and the score of a failed case; asked of the registry by name.
BASELINE_FRAMEWORK = "constant"


class RobustnessSettings(EvaluationSettings):
    """`robustness:` in a suite. Severities are shares of cells (of features, for feature_drop)."""

    corruptions: list[str] = Field(default_factory=lambda: list(DEFAULT_CORRUPTIONS))
    severities: list[float] = Field(default_factory=lambda: [0.1, 0.25, 0.5, 1.0])
    # `result` below clean - breaking_share x (clean - constant predictor) is broken (0.5: halfway).
    breaking_share: float = Field(default=0.5, gt=0, le=1)
    resolution: float = Field(default=0.05, gt=0, le=0.5)  # stop bisecting when the bracket is this narrow
    max_bisections: int = Field(default=4, ge=0, le=20)  # per corruption
    coverage_min: float = Field(default=0.5, ge=0, le=1)  # share of (column x corruption) cells to exercise
    seed: int = Field(default=0, ge=0)
    # Draws per curve point (other seeds, same severity): their mean is the point, min..max its band.
    # The draws of a case share one predict call; when time_s would not give every curve case this
    # many, later cases get fewer (DrawPlanner), so the curves still finish.
    draws: int = Field(default=3, ge=1, le=50)
    # Adversarial boundary samples (HopSkipJump, black-box): rows attacked (0: none) and iterations
    # per row. 8 rows x 5 iterations is about 150 predict calls per row; the attack and the steering
    # share what the curves leave of `boundary_share` x time_s, and stop between rows when it is spent.
    adversarial_rows: int = Field(default=8, ge=0, le=1000)
    attack_iterations: int = Field(default=5, ge=1, le=100)
    flip_budget: float = Field(default=1.0, gt=0)  # units (spreads, category changes) of a "small" flip
    regression_share: float = Field(default=0.5, gt=0)  # of the target's spread: a regression "flip"
    boundary_share: float = Field(default=0.25, ge=0, le=0.9)  # of time_s kept for attack and steering
    # Effectiveness targets: generation near the boundary goes on while the boundary density (share
    # of generated rows with a top-two probability gap under boundary_delta) is under its target.
    boundary_delta: float = Field(default=0.1, gt=0, le=1)
    boundary_target: float = Field(default=0.3, ge=0, le=1)
    # At most this many boundary rounds (a batch of pairs bisected onto the boundary, seven predict
    # calls each; 0: no boundary steering): a model slow per call (H2O's REST client, about 0.4 s)
    # otherwise spends the stage's boundary time on them.
    boundary_rounds: int = Field(default=20, ge=0, le=1000)
    # Anomaly capture steers too: while its AUROC over the labelled generated cases is under
    # anomaly_target, new copies of the corruption cells where it is lowest are drawn (at most
    # anomaly_rounds rounds of two cells; 0: no anomaly steering). Their rows go to steered_cases.csv.
    anomaly_target: float = Field(default=0.7, ge=0, le=1)
    anomaly_rounds: int = Field(default=10, ge=0, le=1000)
    # Activation coverage (models that offer their torch network): the share of neurons above
    # activation_threshold for at least one generated case; generation goes on while it is under
    # activation_target. coverage_rows: generated rows kept to measure it on.
    activation_threshold: float = 0.0
    activation_target: float = Field(default=0.5, ge=0, le=1)
    coverage_rows: int = Field(default=256, ge=1, le=10_000)
    # Attacks in the network's pixel space (FGSM, PGD, HopSkipJump) on this many seeded test rows,
    # within an L-inf budget of pixel_eps (pixels in 0..1); 0 rows: none.
    pixel_rows: int = Field(default=32, ge=0, le=10_000)
    pixel_eps: float = Field(default=0.1, gt=0, le=1)
    replay: bool = True  # replay first the cases that broke this job's model on an earlier execution

    @field_validator("corruptions")
    @classmethod
    def _known_corruptions(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in CORRUPTIONS]
        if unknown:
            known = ", ".join(CORRUPTIONS)
            raise ValueError(f"unknown corruption '{unknown[0]}'; known corruptions: {known}")
        if not value:
            raise ValueError("name at least one corruption")
        return list(dict.fromkeys(value))

    @field_validator("severities")
    @classmethod
    def _severities_in_range(cls, value: list[float]) -> list[float]:
        outside = [s for s in value if not 0 < s <= 1]
        if outside:
            raise ValueError(f"severity {outside[0]} is outside (0, 1]; severities are shares of cells")
        if not value:
            raise ValueError("give at least one severity")
        return sorted(set(value))


def case_seed(data_version: str, fold: int, corruption: str, target: str, severity: float, seed: int,
              draw: int = 0) -> int:
    """The seed of one corrupted copy: a function of what determines it, never of the framework.
    Draw 0 keeps the key it had before draws existed, so earlier cases tables stay comparable."""
    key = f"{data_version}|{fold}|{corruption}|{target}|{severity:.6f}|{seed}" + (f"|d{draw}" if draw else "")
    return int(hashlib.md5(key.encode()).hexdigest()[:8], 16)


def frame_md5(frame: pd.DataFrame) -> str:
    return hashlib.md5(frame.to_csv(index=False).encode()).hexdigest()


class Scorer:
    """Runs one case: corrupt, predict through the saved model, check the output, score via the harness.

    A curve case (phase preset or bisect) is drawn `draws` times with other seeds; a coverage case
    once. Every scored copy's per-row confidence and correctness are kept (`observed`) for the
    effectiveness signals.

    A classifier is asked once per frame, through predict_proba: its decision is the class of
    highest probability, the one its margin and confidence measure (as the boundary search and the
    steering read it), so a copy costs one model call, not two (H2O answers each through a REST
    round trip). Where a framework's own predict thresholds otherwise (H2O's max-F1 threshold on
    binary problems) the stage's clean result can differ from the job's own score; every case is
    scored the same way, so the degradations compare."""

    def __init__(self, context: EvaluationContext, model: Any, facts: FrameFacts,
                 targets: dict[str, list[str]], breaking_share: float, seed: int, draws: int = 1) -> None:
        self.context, self.model, self.facts, self.targets = context, model, facts, targets
        self.breaking_share, self.seed, self.draws = breaking_share, seed, draws
        self.observed: list[Observation] = []
        self.call_s = 0.0  # running mean of the seconds one copy of the test fold costs the model
        # Generated rows kept for the torch signals (activation coverage); the stage sets the cap.
        self.kept: list[pd.DataFrame] = []
        self.keep_rows = 0
        fold = context.fold
        self.X, self.task = fold.X_test, fold.task
        self.constant_scores = _constant_scores(context)
        self.clean_scores = self.predict_and_score(self.X)  # a failure here fails the evaluation
        self.clean, self.constant = self.clean_scores["result"], self.constant_scores["result"]
        self.data_version, self.fold_index = str(context.job.data_version), int(context.job.fold)

    def predict_and_score(self, frame: pd.DataFrame, observe: bool = False) -> dict[str, float]:
        return self.predict_and_score_copies([frame], observe)[0]

    def predict_and_score_copies(self, frames: list[pd.DataFrame], observe: bool = False,
                                 source: tuple[str, str, float] | None = None) -> list[dict[str, float]]:
        """Scores of each copy of the test fold. Copies of the same dtypes go through the model in
        one predict call (the draws of a case cost about one call on a model with a large per-call
        cost); copies whose dtypes differ (categories added by one draw only) go one by one, so a
        model never sees categories merged across copies."""
        same = all(f.dtypes.equals(frames[0].dtypes) for f in frames[1:])
        if len(frames) > 1 and not same:
            return [s for f in frames for s in self.predict_and_score_copies([f], observe, source)]
        stacked = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        called = time.perf_counter()
        predictions, proba = answer(self.model, self.task, stacked)
        if len(frames) == 1:  # the cost of one call on the test fold
            spent = time.perf_counter() - called
            self.call_s = 0.8 * self.call_s + 0.2 * spent if self.call_s else spent
        rows, scores = len(frames[0]), []
        truth = self.context.fold.y_test.astype(str).to_numpy()
        for index in range(len(frames)):
            part = slice(index * rows, (index + 1) * rows)
            part_proba = None if proba is None else proba.iloc[part].reset_index(drop=True)
            if observe and self.keep_rows > sum(len(k) for k in self.kept):
                room = self.keep_rows - sum(len(k) for k in self.kept)
                copy = frames[index]
                self.kept.append(copy.sample(min(room, len(copy)), random_state=self.seed + len(self.kept)))
            if observe and part_proba is not None:
                self.observed.append(Observation.of(np.asarray(part_proba, dtype=float), predictions[part],
                                                    truth, source))
            scores.append(self.context.score(predictions[part], part_proba))
        return scores

    def __call__(self, corruption: str, target: str, severity: float, phase: str,
                 first_draw: int = 0) -> Case:
        """One case; `first_draw` > 0 draws other copies of the same cell (the anomaly steering's)."""
        started = time.perf_counter()
        entry = CORRUPTIONS[corruption]
        targets = self.targets[corruption] if target == FRAME else [target]
        draws = self.draws if phase in CURVE_PHASES else 1
        # An image corruption is seeded by the image card, not by this table's data version: an image
        # card and its pixel table (the flattened images) get the very same corrupted images.
        version = (self.facts.image.seed_key if entry.family == IMAGE_FAMILY and self.facts.image is not None
                   else self.data_version)
        case = Case(corruption, entry.family, target, severity, phase,
                    corruption_seed=case_seed(version, self.fold_index, corruption, target,
                                              severity, self.seed, first_draw), draws=draws)
        copies = []
        for draw in range(first_draw, first_draw + draws):
            seeds = {t: case_seed(version, self.fold_index, corruption, t, severity,
                                  self.seed, draw) for t in targets}
            try:
                corrupted, mask = corrupt(self.X, entry, targets, severity, seeds.__getitem__, self.facts)
            except Exception as exc:  # noqa: BLE001 - recorded and reported (the evaluation is partial), not fatal
                # Whether a corruption applies is decided before any case; failing here is a defect.
                case.status, case.error = BUILD_ERROR, f"{type(exc).__name__}: {exc}"[:300]
                case.wall_s = time.perf_counter() - started
                return case
            if draw == first_draw:
                case.md5, case.cells_changed = frame_md5(corrupted), int(mask.to_numpy().sum())
            copies.append(corrupted)
        try:
            all_scores = self.predict_and_score_copies(copies, observe=True,
                                                       source=(corruption, target, severity))
        except Exception as exc:  # noqa: BLE001 - a model that breaks on corrupted input is the finding
            case.status, case.error = "failure", f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
            all_scores = [dict(self.constant_scores) for _ in copies]
        case.scores = all_scores[0]
        results = [scores["result"] for scores in all_scores]
        found = [degradation(self.clean, self.constant, r) for r in results]
        case.result = float(np.mean(results))
        case.degradation = degradation(self.clean, self.constant, case.result)
        case.broken = case.degradation > self.breaking_share
        case.degradation_low, case.degradation_high = float(min(found)), float(max(found))
        case.degradation_std = float(np.std(found, ddof=1)) if len(found) > 1 else 0.0
        case.draw_broken = [d > self.breaking_share for d in found]
        case.wall_s = time.perf_counter() - started
        return case


def answer(model: Any, task: Any, frame: pd.DataFrame) -> tuple[np.ndarray, pd.DataFrame | None]:
    """(predictions, probabilities) of `frame` from one model call, checked: a classifier's
    predict_proba (columns in the task's class order; the prediction its argmax), a regressor's
    predict."""
    if not task.is_classification:
        predictions = np.asarray(model.predict(frame))
        if len(predictions) != len(frame):
            raise ValueError(f"returned {len(predictions)} predictions for {len(frame)} rows")
        if not np.isfinite(predictions.astype(float)).all():
            raise ValueError("returned NaN or infinite predictions")
        return predictions, None
    classes = list(task.classes)
    values = class_probabilities(model, frame, [str(c) for c in classes])
    if not np.isfinite(values).all():
        raise ValueError("returned NaN or infinite probabilities")
    return decide(values, classes), pd.DataFrame(values, columns=classes)


def _constant_scores(context: EvaluationContext) -> dict[str, float]:
    """The constant predictor's scores on this fold: what a failed case scores, and the curve's floor."""
    fold = context.fold
    baseline = get_adapter(BASELINE_FRAMEWORK).fit(fold.X_train, fold.y_train, task=fold.task,
                                                   budget=context.budget, params={},
                                                   workdir=context.folder, seed=0)
    return context.score(*answer(baseline, fold.task, fold.X_test))  # read as every case is


def given_families(entry: ModalityEvaluations) -> frozenset[str] | None:
    """The corruption families a modality's entry gives its jobs (None: all); a family it names
    that does not exist is one sentence, since it would silently leave every corruption out."""
    families = entry.corruption_families
    unknown = sorted(set(families or ()) - set(FAMILIES))
    if unknown:
        raise UserError(f"the {entry.name} modality's MODALITY_EVALUATIONS: unknown corruption family "
                        f"'{unknown[0]}' in corruption_families; known families: {', '.join(FAMILIES)}.")
    return families


def permutation_importance(scorer: Scorer, seed: int) -> tuple[list[str], str]:
    """Columns by the drop in `result` when each one's test values are shuffled, most important first.

    All shuffled copies go through the model in one call (cheap for models with a large per-call
    cost). If the model cannot take it, the card's column order stands, and why is returned.
    """
    X, columns = scorer.X, list(scorer.X.columns)
    if len(columns) < 2:
        return columns, ""
    rng = np.random.default_rng(seed)
    copies = []
    for column in columns:
        shuffled = X.copy()
        shuffled[column] = X[column].iloc[rng.permutation(len(X))].set_axis(X.index)  # keeps the dtype
        copies.append(shuffled)
    stacked = pd.concat(copies, ignore_index=True)
    try:
        predictions, proba = answer(scorer.model, scorer.task, stacked)
        drops = {}
        for index, column in enumerate(columns):
            rows = slice(index * len(X), (index + 1) * len(X))
            part = proba.iloc[rows].reset_index(drop=True) if proba is not None else None
            drops[column] = scorer.clean - scorer.context.score(predictions[rows], part)["result"]
    except Exception as exc:  # noqa: BLE001 - the ordering is a convenience, not a result
        return columns, f"permutation check failed ({type(exc).__name__}: {exc}); card order used"
    return sorted(columns, key=lambda c: (-drops[c], columns.index(c))), ""


def summarize(outcome: Any, scorer: Scorer, presets: list[float]) -> dict[str, float]:
    """The robust_* metrics of one job (see RobustnessEvaluation.metrics). Only complete curves
    (every preset scored) give an AUC and a breaking point, so cut-short curves never flatter."""
    metrics: dict[str, float] = {}
    by_family: dict[str, list[float]] = {}
    for name, curve in outcome.curves.items():
        if not curve.complete(presets):
            continue
        metrics[f"robust_{name}_auc"] = curve.auc
        # 1.0 when it held at every severity (the cases table tells which)
        metrics[f"robust_{name}_breaking"] = curve.breaking_point if curve.breaking_point is not None else 1.0
        interval = curve.breaking_interval()
        if interval is not None:
            metrics[f"robust_{name}_breaking_low"], metrics[f"robust_{name}_breaking_high"] = interval
        by_family.setdefault(curve.family, []).append(curve.auc)
    for family, aucs in by_family.items():
        metrics[f"robust_{family}_auc"] = float(np.mean(aucs))
    breaking = [v for k, v in metrics.items() if k.endswith("_breaking")]
    if breaking:
        metrics["robust_breaking_mean"] = float(np.mean(breaking))
    cases = [c for c in outcome.all_cases() if c.status != BUILD_ERROR]
    aucs = [a for values in by_family.values() for a in values]
    if aucs:
        metrics["robust_auc"] = float(np.mean(aucs))
    metrics["robust_cases"] = float(len(cases))
    metrics["robust_failures"] = float(sum(c.status == "failure" for c in cases))
    metrics["robust_build_errors"] = float(sum(c.status == BUILD_ERROR for c in outcome.all_cases()))
    if cases:
        metrics["robust_degradation_mean"] = float(np.mean([c.degradation for c in cases]))
    metrics["robust_coverage"] = outcome.coverage
    metrics["robust_clean_result"] = scorer.clean
    return metrics


class RobustnessEvaluation(PostJobEvaluation):
    name = "robustness"
    settings_model = RobustnessSettings
    figures: ClassVar[tuple[Figure, ...]] = (
        Figure("robust_auc", "mean robustness AUC over the corruptions that apply (1 = never degrades)",
            higher_is_better=True, compared="result", reported=True),
        Figure("robust_FAMILY_auc", "robustness AUC of a corruption family (missing, noise, unit, "
                                    "category, feature_drop, text, stream, image): mean over its "
                                    "corruptions"),
        Figure("robust_CORRUPTION_auc", "area under 1 - degradation over severity for one corruption, / "
                                        "max severity"),
        Figure("robust_CORRUPTION_breaking", "smallest severity where result fell below the breaking "
                                             "threshold (halfway to the constant predictor); 1.0 if it "
                                             "held everywhere"),
        Figure("robust_CORRUPTION_breaking_low", "lowest breaking severity over the draws (each draw's own "
                                                 "curve); with _high, the breaking point's interval"),
        Figure("robust_CORRUPTION_breaking_high", "highest breaking severity over the draws (1.0: a draw "
                                                  "held)"),
        Figure("robust_breaking_mean", "mean breaking point over the corruptions (lower: breaks sooner)",
            higher_is_better=True, compared="result"),
        Figure("robust_failures", "cases where the model raised or returned garbage (scored as the "
                                  "constant predictor)"),
        Figure("robust_cases", "corrupted copies of the test fold scored"),
        Figure("robust_build_errors", "corrupted copies that could not be built (a defect of the "
                                      "corruption, never the model's; the evaluation is then partial)"),
        Figure("robust_degradation_mean", "mean degradation over the cases (0 = unaffected, 1 = constant "
                                          "predictor)"),
        Figure("robust_coverage", "share of (column x corruption) cells exercised", "share"),
        Figure("robust_clean_result", "result on the clean test fold, re-scored in the evaluation"),
        Figure("robust_adv_rows", "test rows given to the black-box boundary search (HopSkipJump) without "
                                  "error"),
        Figure("robust_adv_errors", "rows on which the boundary search raised (recorded; the rest went on)"),
        Figure("robust_adv_flip_median", "median minimal flip distance over the flipped rows (numeric "
                                         "features in training spreads, a category change one unit)"),
        Figure("robust_adv_flip_p10", "10th-percentile minimal flip distance over the flipped rows"),
        Figure("robust_adv_flip_share", "share of attacked rows flipped within flip_budget units", "share"),
        Figure("robust_adv_s", "seconds the boundary search took (ART's import included)", "s"),
        Figure("robust_anomaly_auroc", "AUROC of (1 - confidence) separating wrong from right predictions "
                                       "on the generated cases (0.5: confidence says nothing of failures)"),
        Figure("robust_boundary_density", "share of generated cases with a top-two probability gap under "
                                          "boundary_delta, steered ones included"),
        Figure("robust_boundary_density_random", "the same over the random corruptions alone"),
        Figure("robust_boundary_density_steered", "the same over the cases steered towards the boundary"),
        Figure("robust_boundary_cases", "cases generated by steering towards the decision boundary"),
        Figure("robust_anomaly_auroc_random", "anomaly-capture AUROC over the random corruptions alone "
                                              "(before its steering)"),
        Figure("robust_anomaly_auroc_steered", "anomaly-capture AUROC over the cases its steering drew "
                                               "(corruption cells where the model's confidence flagged its "
                                               "failures worst)"),
        Figure("robust_anomaly_cases", "corrupted copies drawn by the anomaly-capture steering"),
        Figure("robust_activation_coverage", "share of the torch network's neurons (leaf layers' output "
                                             "units) above activation_threshold for at least one generated "
                                             "case, steered ones included", "share"),
        Figure("robust_activation_coverage_before", "the same before steering towards unfired neurons"),
        Figure("robust_activation_cases", "noise cases generated around test rows to raise activation "
                                          "coverage"),
        Figure("robust_pixel_rows", "test rows given to the attacks in the network's input space (pixels)"),
        Figure("robust_pixel_errors", "pixel-space attacks that raised (recorded; the others went on)"),
        Figure("robust_fgsm_flip_share", "share of the pixel rows whose prediction FGSM (gradient sign, "
                                         "minimal mode) flipped within pixel_eps (L-inf, pixels in 0..1)",
            "share"),
        Figure("robust_fgsm_linf_median", "median L-inf perturbation of the rows FGSM flipped (its "
                                          "smallest flipping step)"),
        Figure("robust_fgsm_l2_median", "median L2 perturbation of the rows FGSM flipped"),
        Figure("robust_fgsm_s", "seconds FGSM took", "s"),
        Figure("robust_pgd_flip_share", "share of the pixel rows PGD (projected gradient descent) flipped "
                                        "within pixel_eps", "share"),
        Figure("robust_pgd_linf_median", "median L-inf perturbation of the rows PGD flipped"),
        Figure("robust_pgd_l2_median", "median L2 perturbation of the rows PGD flipped"),
        Figure("robust_pgd_s", "seconds PGD took", "s"),
        Figure("robust_pixel_hsj_flip_share", "share of the pixel rows HopSkipJump (decisions only, in "
                                              "pixel space) flipped within pixel_eps", "share"),
        Figure("robust_pixel_hsj_linf_median", "median L-inf perturbation of the rows HopSkipJump flipped "
                                               "(unbounded)"),
        Figure("robust_pixel_hsj_l2_median", "median L2 perturbation of the rows HopSkipJump flipped"),
        Figure("robust_pixel_hsj_s", "seconds HopSkipJump in pixel space took", "s"),
        Figure("robust_replayed", "cases saved by an earlier execution of the job and replayed first"),
        Figure("robust_replay_still_breaking", "replayed cases that still break the model"),
    )

    def applies_to(self, spec: DatasetSpec, framework: str) -> str | None:
        if spec.problem_type not in ("binary", "multiclass", "regression"):
            return f"robustness scores tabular problem types, not {spec.problem_type}"
        return None

    def run(self, context: EvaluationContext) -> EvaluationResult:
        settings = context.settings
        assert isinstance(settings, RobustnessSettings)  # the context holds this evaluation's own settings
        fold = context.fold
        modality = evaluations_of(context.spec.modality)  # streams, images, families: its entry's
        facts = FrameFacts(roles=dict(fold.task.column_roles), sensor_streams=modality.sensor_streams,
                           image=modality.images(context.spec, list(fold.X_test.columns)))
        scorer = Scorer(context, context.model, facts, {}, settings.breaking_share, settings.seed,
                        settings.draws)
        importance, importance_note = permutation_importance(scorer, settings.seed)
        conditions = {c: condition_column(fold.X_test, c, facts) for c in fold.X_test.columns}
        facts = FrameFacts(roles=facts.roles, importance=importance, sensor_streams=facts.sensor_streams,
                           conditions=conditions, image=facts.image)
        scorer.facts = facts
        order = {column: rank for rank, column in enumerate(importance)}
        not_applicable: dict[str, str] = {}
        chosen: dict[str, tuple[str, list[str]]] = {}
        families = given_families(modality)
        for name in settings.corruptions:
            entry = CORRUPTIONS[name]
            if families is not None and entry.family not in families:
                not_applicable[name] = (f"{entry.family} corruptions are not given to {modality.name} "
                                        f"datasets (its corruption_families: {', '.join(sorted(families))})")
                continue
            targets = [] if entry.unavailable else entry.targets(fold.X_test, facts)
            if entry.unavailable:
                if facts.sensor_streams:
                    not_applicable[name] = entry.unavailable
                continue
            if not targets:
                not_applicable[name] = f"nothing in {context.spec.name} for it to hit ({entry.description})"
                continue
            # Most important first (streams by their best column), so thin coverage hits what matters.
            targets = sorted(targets, key=lambda t: min(
                (order.get(c, len(order)) for c in facts.streams(fold.X_test).get(t, [t])), default=0))
            chosen[name] = (entry.family, targets)
        scorer.targets = {name: targets for name, (_, targets) in chosen.items()}
        if any(family == IMAGE_FAMILY for family, _ in chosen.values()):
            preload_image_transforms()
        network, network_reason = torch_network_of(scorer.model)
        if network is not None:
            scorer.keep_rows = settings.coverage_rows
        case_cost = CaseCost(scorer.call_s * settings.draws)
        # Time kept for the boundary search and steering, released to them when the curves are done.
        kept = [settings.boundary_share * settings.time_s if settings.adversarial_rows else 0.0]

        cells = sum(len(targets) for _, targets in chosen.values())
        planner = DrawPlanner(settings.draws, curve_cases=len(chosen) * (len(settings.severities) + 2),
                              coverage_cases=int(np.ceil(settings.coverage_min * cells)))

        def run_case(name: str, target: str, severity: float, phase: str) -> Case:
            if phase in CURVE_PHASES:
                scorer.draws = planner.draws(context.time_left_s() - RESERVE_S - kept[0])
            case = scorer(name, target, severity, phase)
            planner.record(case)
            case_cost.record(case.wall_s)
            return case

        setup_s = time.monotonic() - context.started  # start-up, model load, clean and constant scores

        def has_time() -> bool:
            return context.time_left_s() > RESERVE_S + kept[0] + 1.5 * case_cost.seconds

        replayed, replay_note = _replay(context, scorer, settings, has_time) if settings.replay else ([], "")
        outcome = search(chosen, run_case, SearchSettings(
            presets=settings.severities, resolution=settings.resolution,
            max_bisections=settings.max_bisections, coverage_min=settings.coverage_min,
            probe_severity=settings.severities[len(settings.severities) // 2]), has_time)
        random_density = boundary_density(scorer.observed, settings.boundary_delta)
        kept[0] = 0.0
        boundary = _boundary(context, scorer, settings, network, network_reason)
        cases = outcome.all_cases()
        table = pd.DataFrame([c.row() for c in cases])
        if not table.empty:
            table.insert(0, "clean_result", scorer.clean)
            table.insert(1, "constant_result", scorer.constant)
        table.to_csv(context.folder / CASES_FILE, index=False)
        metrics = summarize(outcome, scorer, settings.severities)
        metrics.update(boundary.metrics)
        if np.isfinite(random_density):
            metrics["robust_boundary_density_random"] = random_density
        metrics.update(_replay_metrics(replayed))
        _save_replay(context, settings, outcome, boundary.attack, replayed)
        complete = outcome.finished_presets and outcome.coverage >= settings.coverage_min
        curves = {name: {"auc": curve.auc, "breaking_point": curve.breaking_point,
                         "breaking_interval": curve.breaking_interval(),
                         "bisections": curve.bisections, "cases": len(curve.cases),
                         "complete": curve.complete(settings.severities)}
                  for name, curve in outcome.curves.items() if curve.scored}
        info = modality.robustness_info(context.spec)
        unbuilt = [c for c in cases if c.status == BUILD_ERROR]
        reasons = [] if complete else [outcome.stop_reason]
        if unbuilt:
            first = unbuilt[0]
            reasons.append(f"{len(unbuilt)} corrupted copies could not be built, e.g. {first.corruption} "
                           f"on {first.target} at {first.severity:g}: {first.error}")
        return EvaluationResult(
            status="partial" if reasons else "ok",
            reason="; ".join(reasons),
            metrics=metrics, files=[CASES_FILE] + boundary.files,
            info={"stop_reason": outcome.stop_reason, "coverage": outcome.coverage,
                  "cells_total": outcome.cells_total, "cells_exercised": outcome.cells_exercised,
                  "curves": curves, "not_applicable": {**not_applicable, **boundary.not_applicable},
                  "importance": importance[:20],
                  "importance_note": importance_note, "clean_result": scorer.clean,
                  "constant_result": scorer.constant, "setup_s": setup_s,
                  "test_fold_call_s": scorer.call_s,  # one model call on the test fold, running mean
                  "cases_s": float(sum(c.wall_s for c in cases)),
                  "failures": sorted({c.error for c in cases if c.status == "failure"})[:10],
                  "boundary": boundary.info, "generation_stopped_by": boundary.stopped_by,
                  "replay": {"note": replay_note, "cases": [asdict(c) for c in replayed]}, **info})


class CaseCost:
    """The expected seconds of the next case: before any case, `estimate` (the clean fold's call
    cost times the draws, so a slow model's first case is not started blind: H2O's took 30 s on a
    loaded machine and left the boundary search no time); then a running mean of the cases."""

    def __init__(self, estimate: float) -> None:
        self.seconds, self.seen = estimate, False

    def record(self, wall_s: float) -> None:
        self.seconds = 0.8 * self.seconds + 0.2 * wall_s if self.seen else wall_s
        self.seen = True


class DrawPlanner:
    """How many draws the next curve case gets: `draws`, or fewer when the time left would not give
    every curve case still planned (and the coverage cases, drawn once) that many at the cost per
    draw seen so far. The cases table's `draws` column says what each case got; the band and the
    breaking interval come from the draws made."""

    def __init__(self, draws: int, curve_cases: int, coverage_cases: int) -> None:
        self.most, self.curve_left, self.coverage_cases = draws, curve_cases, coverage_cases
        self.draw_s = 0.0  # running mean of the seconds per draw

    def draws(self, seconds_left: float) -> int:
        if not self.draw_s:
            return self.most
        units = seconds_left / self.draw_s - self.coverage_cases  # draws affordable for the curves
        return int(np.clip(units // max(self.curve_left, 1), 1, self.most))

    def record(self, case: Case) -> None:
        per_draw = case.wall_s / max(case.draws, 1)
        self.draw_s = 0.8 * self.draw_s + 0.2 * per_draw if self.draw_s else per_draw
        if case.phase in CURVE_PHASES:
            self.curve_left = max(self.curve_left - 1, 0)


@dataclass
class Boundary:
    """What the adversarial search and the steering found (see _boundary)."""

    metrics: dict[str, float] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    not_applicable: dict[str, str] = field(default_factory=dict)
    stopped_by: str = ""
    attack: AttackOutcome | None = None


def torch_network_of(model: Any) -> tuple[TorchNetwork | None, str]:
    """The model's torch network, or None and why it offers none."""
    try:
        return model.torch_network(), ""
    except NotOffered as exc:
        return None, str(exc)


def _boundary(context: EvaluationContext, scorer: Scorer, settings: RobustnessSettings,
              network: TorchNetwork | None = None, network_reason: str = "") -> Boundary:
    """Adversarial boundary samples on a seeded sample of test rows (in the network's pixel space too,
    where the model offers one), then steering towards the boundary and towards unfired neurons, then
    the effectiveness signals over every generated case; each part within the time left."""
    fold, out = context.fold, Boundary()
    task = fold.task
    space = FeatureSpace.of(fold.X_train, dict(task.column_roles))
    classes = [str(c) for c in task.classes] if task.is_classification else None
    target_spread = 1.0
    if classes is None:
        spread = float(pd.to_numeric(fold.y_train, errors="coerce").std())
        target_spread = spread if np.isfinite(spread) and spread > 0 else 1.0
    mean_row_s = [0.0]
    attack_floor = RESERVE_S + STEER_SHARE * settings.time_s

    def attack_time() -> bool:
        return context.time_left_s() > attack_floor + 1.5 * mean_row_s[0]

    left = context.time_left_s() - attack_floor
    if not settings.adversarial_rows:
        out.not_applicable["adversarial"] = "robustness.adversarial_rows is 0"
    elif not space.dimensions:
        out.not_applicable["adversarial"] = "no numeric or categorical feature to perturb"
    elif left < ATTACK_START_S:
        reason = (f"not started: the curves left {max(left, 0):.0f} s, fewer than the {ATTACK_START_S:.0f} s "
                  "the boundary search needs to start (raise time_s or boundary_share)")
        out.info["adversarial"] = {"stop_reason": reason}
    else:
        rng = np.random.default_rng(settings.seed)
        rows = sorted(rng.choice(len(fold.X_test), min(settings.adversarial_rows, len(fold.X_test)),
                                 replace=False).tolist())
        attack_settings = AttackSettings(max_iter=settings.attack_iterations,
                                         flip_budget=settings.flip_budget,
                                         regression_share=settings.regression_share, seed=settings.seed)

        started = time.perf_counter()
        attack = attack_rows(scorer.model, space, fold.X_test, fold.X_train, rows, classes, target_spread,
                             attack_settings, _RowTimer(attack_time, mean_row_s),
                             lambda: context.time_left_s() > attack_floor)
        out.attack = attack
        if attack.not_applicable:
            out.not_applicable["adversarial"] = attack.not_applicable
        out.metrics.update(attack.metrics(settings.flip_budget))
        out.metrics["robust_adv_s"] = time.perf_counter() - started
        table = pd.DataFrame([asdict(a) for a in attack.attacks])
        table.to_csv(context.folder / ADVERSARIAL_FILE, index=False)
        out.files.append(ADVERSARIAL_FILE)
        errors = sorted({a.error for a in attack.attacks if a.error})
        out.info["adversarial"] = {
            "stop_reason": attack.stop_reason, "planned": attack.planned, "attacked": len(attack.attacks),
            "features_changed": attack.features_changed(), "errors": errors[:5],
            "model_calls": attack.calls, "s_per_call": attack.call_s / attack.calls if attack.calls else None,
            "kind": "black-box (HopSkipJump, decision-based, through predict_proba only)",
            "units": "numeric features in training spreads; a category change is one unit"}
        if attack.boundary_rows is not None and classes is not None:
            try:
                proba = class_probabilities(scorer.model, attack.boundary_rows, classes)
                scorer.observed.append(Observation.of(proba, None, None))
            except Exception as exc:  # noqa: BLE001 - the signals go on without these rows
                out.info["adversarial"]["signal_error"] = f"{type(exc).__name__}: {exc}"[:300]
    pixel = None
    if network is None:
        out.not_applicable["pixel_attacks"] = out.not_applicable["activation_coverage"] = network_reason
    else:
        pixel = _pixel_attacks(context, scorer, settings, network, out, attack_floor)
    if classes is None:
        out.not_applicable["boundary_density"] = "regression has no class margin"
        out.stopped_by = "nothing to steer: boundary density needs class probabilities"
        if network is not None:
            out.stopped_by += "; " + _activation(context, scorer, settings, network, pixel, out)
        return out
    steer_settings = SteerSettings(delta=settings.boundary_delta, target=settings.boundary_target,
                                   max_rounds=settings.boundary_rounds, seed=settings.seed)
    anomaly_cases: list[Case] = []

    def run_cell(source: tuple[str, str, float], draw: int) -> None:
        anomaly_cases.append(scorer(*source[:3], "anomaly", first_draw=draw))

    # Before any round, a boundary round's predict calls (its bisection steps and one for its ends)
    # at the cost of a call on the test fold so far: a slow model's first round must fit too.
    round_s: list[float] = [(steer_settings.steps + 1) * scorer.call_s]
    last_check: list[float] = []

    def steer_time() -> bool:  # then the cost of the last round, learnt as the rounds go
        now = time.perf_counter()
        if last_check:
            round_s[0] = now - last_check[0]
        last_check[:] = [now]
        return context.time_left_s() > RESERVE_S + 1.5 * round_s[0]

    try:
        boundary = BoundarySteer(scorer.model, space, fold.X_test, classes, scorer.observed, steer_settings)
        anomaly = AnomalySteer(scorer.observed, run_cell, AnomalySettings(
            target=settings.anomaly_target, max_rounds=settings.anomaly_rounds))
        reasons = steer_jointly([boundary, anomaly], steer_time)
    except Exception as exc:  # noqa: BLE001 - the steering is recorded as failed; the figures so far stand
        out.stopped_by = f"steering failed ({type(exc).__name__}: {exc})".splitlines()[0][:300]
    else:
        steered = boundary.outcome(reasons[boundary.name])
        hunted = anomaly.outcome(reasons[anomaly.name])
        out.stopped_by = "; ".join(reasons[s.name] for s in (boundary, anomaly))
        out.metrics["robust_boundary_cases"] = float(steered.cases)
        if np.isfinite(steered.density_steered):
            out.metrics["robust_boundary_density_steered"] = steered.density_steered
        out.metrics["robust_anomaly_cases"] = float(hunted.cases)
        for name, value in (("robust_anomaly_auroc_random", hunted.auroc_before),
                            ("robust_anomaly_auroc_steered", hunted.auroc_steered)):
            if np.isfinite(value):
                out.metrics[name] = value
        out.info["steering"] = asdict(steered)
        out.info["anomaly_steering"] = asdict(hunted)
    if anomaly_cases:
        pd.DataFrame([c.row() for c in anomaly_cases]).to_csv(context.folder / STEERED_FILE, index=False)
        out.files.append(STEERED_FILE)
    if network is not None:
        out.stopped_by += "; " + _activation(context, scorer, settings, network, pixel, out)
    density = boundary_density(scorer.observed, settings.boundary_delta)
    if np.isfinite(density):
        out.metrics["robust_boundary_density"] = density
    capture = anomaly_capture(scorer.observed)
    if np.isfinite(capture):
        out.metrics["robust_anomaly_auroc"] = capture
    return out


def _pixel_attacks(context: EvaluationContext, scorer: Scorer, settings: RobustnessSettings,
                   network: TorchNetwork, out: Boundary, attack_floor: float) -> PixelOutcome | None:
    """FGSM, PGD and HopSkipJump in the network's input space on seeded test rows, in the time the
    boundary search leaves; figures apart from the black-box ones (robust_adv_*). The attacked
    inputs join the generated cases the signals read (their truth: the row's label)."""
    X = context.fold.X_test
    left = context.time_left_s() - attack_floor
    if network.clip_values is None or network.input_shape is None:
        out.not_applicable["pixel_attacks"] = ("its inputs are discrete (token ids): gradients cannot "
                                               "move them")
        return None
    if not settings.pixel_rows:
        out.not_applicable["pixel_attacks"] = "robustness.pixel_rows is 0"
        return None
    if left < ATTACK_START_S:
        out.info["pixel"] = {"stop_reason": f"not started: {max(left, 0):.0f} s left, fewer than the "
                                            f"{ATTACK_START_S:.0f} s the attacks need (raise time_s)"}
        return None
    rows = sorted(np.random.default_rng(settings.seed).choice(len(X), min(settings.pixel_rows, len(X)),
                                                              replace=False).tolist())
    x = network.inputs(X.iloc[rows]).detach().cpu().numpy()
    pixel_settings = GradientSettings(eps=settings.pixel_eps, eps_step=settings.pixel_eps / 10,
                                      hsj_iter=settings.attack_iterations, seed=settings.seed)
    outcome = pixel_attacks(network, x, pixel_settings,
                            lambda last_s: context.time_left_s() > attack_floor + 1.5 * last_s)
    out.metrics.update(outcome.metrics())
    truth = context.fold.y_test.astype(str).to_numpy()[rows]
    try:
        for perturbed in outcome.adversarial:
            proba = _softmax(network, perturbed)
            predicted = np.asarray(network.classes)[proba.argmax(axis=1)]
            scorer.observed.append(Observation.of(proba, predicted, truth[: len(perturbed)]))
    except Exception as exc:  # noqa: BLE001 - the signals go on without these cases
        out.info["pixel_signal_error"] = f"{type(exc).__name__}: {exc}"[:300]
    out.info["pixel"] = {
        "rows": rows, "eps": settings.pixel_eps, "kind": "in the network's input space: FGSM (minimal), PGD "
        "(gradients), HopSkipJump (decisions only); L-inf budget pixel_eps, pixels in 0..1",
        "attacks": {a.name: {"seconds": a.seconds, "error": a.error, "skipped": a.skipped}
                    for a in outcome.attacks}}
    return outcome


def _softmax(network: TorchNetwork, x: np.ndarray) -> np.ndarray:
    """The network's class probabilities for inputs `x`."""
    # torch is imported here, not at the top: only models that offer a torch network come here.
    import torch

    device = next(network.module.parameters()).device
    with torch.no_grad():
        logits = network.module(torch.from_numpy(x).to(device)).float()
    return torch.softmax(logits, dim=1).cpu().numpy()


def _activation(context: EvaluationContext, scorer: Scorer, settings: RobustnessSettings,
                network: TorchNetwork, pixel: PixelOutcome | None, out: Boundary) -> str:
    """Activation coverage over the generated cases (kept corrupted rows, the pixel attacks' inputs),
    then noise cases of growing amplitude around test rows while it is under its target and time
    remains; returns why that generation stopped."""
    # torch is imported here, not at the top: only models that offer a torch network come here.
    import torch

    device = next(network.module.parameters()).device
    batches: list[Any] = [network.inputs(frame) for frame in scorer.kept]
    batches += [torch.from_numpy(x).to(device) for x in (pixel.adversarial if pixel else [])]
    threshold, target = settings.activation_threshold, settings.activation_target

    def measure() -> float:
        if not batches:
            return float("nan")
        return activation_coverage(network.module, batches, threshold, network.units)

    before = measure()
    coverage, added, rounds, round_s = before, 0, 0, 0.0
    base = None
    if network.clip_values is not None:
        X = context.fold.X_test
        base = network.inputs(X.iloc[: min(len(X), settings.coverage_rows)]).detach().cpu().numpy()
    rng = np.random.default_rng(settings.seed)
    while True:
        if np.isfinite(coverage) and coverage >= target:
            reason = f"activation coverage {coverage:.2f} reached its target {target:.2f}"
            break
        shown = f"{coverage:.2f}" if np.isfinite(coverage) else "unmeasured"
        if base is None or not len(base):
            reason = (f"activation coverage {shown} under its target {target:.2f}: discrete inputs, "
                      "nothing to steer")
            break
        if rounds >= 8:
            reason = f"8 activation rounds done (coverage {shown}, target {target:.2f})"
            break
        if context.time_left_s() <= RESERVE_S + 1.5 * round_s:
            reason = f"time limit reached (activation coverage {shown}, target {target:.2f})"
            break
        started = time.perf_counter()
        amplitude = min(1.0, settings.pixel_eps * 2 ** rounds)  # wider each round: neurons not yet fired
        assert network.clip_values is not None
        batches.append(torch.from_numpy(noise_cases(base, network.clip_values, amplitude, rng)).to(device))
        coverage = measure()
        added, rounds, round_s = added + len(base), rounds + 1, time.perf_counter() - started
    if np.isfinite(before):
        out.metrics["robust_activation_coverage_before"] = before
    if np.isfinite(coverage):
        out.metrics["robust_activation_coverage"] = coverage
    out.metrics["robust_activation_cases"] = float(added)
    out.info["activation"] = {"threshold": threshold, "target": target, "before": before, "after": coverage,
                              "cases_added": added, "rounds": rounds, "stop_reason": reason}
    return reason


class _RowTimer:
    """has_time for the attack that learns the cost of a row from the rows done so far."""

    def __init__(self, has_time: Callable[[], bool], mean_row_s: list[float]) -> None:
        self.has_time, self.mean_row_s = has_time, mean_row_s
        self.last: float | None = None

    def __call__(self) -> bool:
        now = time.perf_counter()
        if self.last is not None:
            spent = now - self.last
            self.mean_row_s[0] = 0.7 * self.mean_row_s[0] + 0.3 * spent if self.mean_row_s[0] else spent
        self.last = now
        return self.has_time()


def _replay(context: EvaluationContext, scorer: Scorer, settings: RobustnessSettings,
            has_time: Callable[[], bool]) -> tuple[list[ReplayCase], str]:
    """The cases saved by an earlier execution of this job, replayed before anything else."""
    job = context.job
    path = replay_path(context.job_dir, context.spec.name, job.framework_id, int(job.fold))
    cases, note = replay.load(path, str(job.data_version))
    if not cases:
        return [], note
    X = context.fold.X_test
    move = None
    if not context.fold.task.is_classification:
        spread = float(pd.to_numeric(context.fold.y_train, errors="coerce").std())
        move = settings.regression_share * (spread if np.isfinite(spread) and spread > 0 else 1.0)

    def predict(frame: pd.DataFrame) -> np.ndarray:  # one model call, the decisions the stage reads
        return answer(scorer.model, scorer.task, frame)[0]

    def run_corruption(case: ReplayCase) -> None:
        if case.corruption not in CORRUPTIONS:
            case.result = f"corruption {case.corruption} no longer exists"
            return
        if case.target == FRAME:
            scorer.targets.setdefault(case.corruption, CORRUPTIONS[case.corruption].targets(X, scorer.facts))
        found = scorer(case.corruption, case.target, case.severity, "replay")
        case.still_breaks = found.broken
        case.result = f"degradation {found.degradation:.3f} ({found.status})"

    stop = replay.replay_all(cases, run_corruption,
                             lambda c: replay.replay_adversarial(c, predict, X, move), len(X), has_time)
    return cases, "; ".join(n for n in (note, stop) if n)


def _replay_metrics(replayed: list[ReplayCase]) -> dict[str, float]:
    done = [c for c in replayed if c.still_breaks is not None]
    if not replayed:
        return {}
    return {"robust_replayed": float(len(done)),
            "robust_replay_still_breaking": float(sum(bool(c.still_breaks) for c in done))}


def _save_replay(context: EvaluationContext, settings: RobustnessSettings, outcome: Any,
                 attack: AttackOutcome | None, replayed: list[ReplayCase]) -> None:
    """Saves what broke the model this time, with what still breaks it from earlier executions."""
    if not settings.replay:
        return
    job = context.job
    key = str(job.key)
    found = [c for c in replayed if c.still_breaks]
    found += [ReplayCase("corruption", corruption=c.corruption, target=c.target, severity=c.severity,
                         found_by=key) for c in outcome.all_cases() if c.broken and c.phase != "replay"]
    if attack is not None:
        found += [ReplayCase("adversarial", row=a.row, perturbed=a.perturbed, before=a.before, found_by=key)
                  for a in attack.attacks if a.flipped]
    path = replay_path(context.job_dir, context.spec.name, job.framework_id, int(job.fold))
    replay.save(path, str(job.data_version), found)


EVALUATION = RobustnessEvaluation()
