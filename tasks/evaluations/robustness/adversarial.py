"""Adversarial boundary samples: the smallest perturbation of a test row that flips its prediction.

Black-box, through the model's `predict_proba` only, so every framework is treated alike: the
decision is the class of highest probability (in the task's class order, the column order
predict_proba answers), never the framework's own `predict`, which may apply a threshold of its
own (H2O's max-F1 threshold on binary problems) and, through H2O's REST client, costs a second
round trip. The Adversarial Robustness Toolbox's HopSkipJump (Chen et al. 2020) is given an ART
`BlackBoxClassifier` whose function answers the one-hot of that decision, and walks along the
decision boundary from a random point of another class towards the row. It searches in the
`FeatureSpace` (numeric features in spreads, a category change one unit). A classification model
that offers no class probabilities is not attacked: the outcome says so (`not_applicable`). For
regression the "class" is whether the prediction moved by at least `regression_share` of the
target's spread (read through `predict`, the only answer a regression model has).

Each row is attacked on its own, so a time limit ends the search between rows with what was found
kept; an attack that raises on a row is recorded with its error and the next row goes on. The time
is also checked before every query: a model whose call is slow (H2O's REST round trip, a second or
so on a loaded machine; about 100 calls make a row) would otherwise take its row past the stage's
limit. A row cut short that way keeps the nearest flipped point the search had queried
(`cut_short`): like HopSkipJump's own answer, an upper bound of the minimal distance, looser.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tasks.evaluations.robustness.space import FeatureSpace
from tasks.frameworks.capabilities import NotOffered

PINNED = 1e-4  # half-width of the clip box of a coordinate the attack must not move


@dataclass(frozen=True)
class AttackSettings:
    rows: int = 8  # test rows attacked (those nearest the boundary first)
    max_iter: int = 5  # HopSkipJump iterations per row
    max_eval: int = 100  # gradient-estimate queries per iteration at most
    init_eval: int = 10
    init_size: int = 20  # random starts tried to find a point of another class
    batch_size: int = 64  # rows per predict call
    flip_budget: float = 1.0  # "flipped within a small budget": at most this many units
    regression_share: float = 0.5  # of the target's spread, for regression
    seed: int = 0


@dataclass
class RowAttack:
    row: int  # position in the test fold
    flipped: bool = False
    distance: float = float("nan")  # units of the feature space; NaN when not flipped
    changed: list[str] = field(default_factory=list)
    before: str = ""  # the prediction on the row, and on the perturbed row (as text)
    after: str = ""
    perturbed: dict[str, Any] = field(default_factory=dict)  # changed columns -> new value (for replay)
    error: str = ""
    queries: int = 0  # vectors the attack asked about
    calls: int = 0  # model calls they took (one predict_proba call per batch)
    wall_s: float = 0.0
    cut_short: bool = False  # the time ran out inside the row: the nearest flip queried so far


class OutOfTime(Exception):
    """Raised by the oracle when no time is left for another query."""


class NoProbabilities(Exception):
    """The classification model offers no class probabilities: the attack, which reads its
    decisions through predict_proba alone, does not apply."""


def class_probabilities(model: Any, frame: pd.DataFrame, classes: list[str]) -> np.ndarray:
    """One predict_proba call: the rows' class probabilities, columns in `classes` order. The
    model's columns are matched to the classes as text (a model answering 0/1 and a task whose
    classes read "0"/"1" agree); an answer lacking a class's column is an error."""
    try:
        proba = model.predict_proba(frame)
    except (NotImplementedError, NotOffered) as exc:
        raise NoProbabilities(f"the model offers no class probabilities ({exc}); the black-box search "
                              "reads its decisions through predict_proba") from exc
    values = np.asarray(proba, dtype=float)
    if values.ndim != 2 or values.shape[0] != len(frame):
        raise ValueError(f"predict_proba returned shape {values.shape} for {len(frame)} rows")
    columns = [str(c) for c in proba.columns] if isinstance(proba, pd.DataFrame) else list(classes)
    if columns == list(classes) and values.shape[1] == len(classes):
        return values
    position = {c: i for i, c in enumerate(columns)}
    if len(columns) != values.shape[1] or any(c not in position for c in classes):
        raise ValueError(f"predict_proba answered the columns {columns}, not the task's classes "
                         f"{list(classes)}")
    return values[:, [position[c] for c in classes]]


def decide(values: np.ndarray, classes: list[Any]) -> np.ndarray:
    """The class of highest probability per row (`values` in `classes` order; a tie goes to the
    first, as argmax breaks it)."""
    chosen = np.empty(len(values), dtype=object)
    chosen[:] = [classes[i] for i in np.asarray(values, dtype=float).argmax(axis=1)]
    return chosen


@dataclass
class AttackOutcome:
    attacks: list[RowAttack]
    planned: int
    stop_reason: str
    boundary_rows: pd.DataFrame | None = None  # the perturbed rows found, one per flipped attack
    not_applicable: str = ""  # why no row was attacked (a classifier without class probabilities)
    calls: int = 0  # model calls over every row, and the seconds inside them
    call_s: float = 0.0

    def metrics(self, budget: float) -> dict[str, float]:
        done = [a for a in self.attacks if not a.error]
        metrics = {"robust_adv_errors": float(len(self.attacks) - len(done))} if self.attacks else {}
        if not done:
            return metrics
        distances = np.array([a.distance for a in done if a.flipped])
        metrics["robust_adv_rows"] = float(len(done))
        metrics["robust_adv_flip_share"] = float(np.mean([a.flipped and a.distance <= budget for a in done]))
        if len(distances):
            metrics["robust_adv_flip_median"] = float(np.median(distances))
            metrics["robust_adv_flip_p10"] = float(np.percentile(distances, 10))
        return metrics

    def features_changed(self, top: int = 5) -> list[tuple[str, int]]:
        counts: dict[str, int] = {}
        for attack in self.attacks:
            if attack.flipped:
                for column in attack.changed:
                    counts[column] = counts.get(column, 0) + 1
        return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


class Oracle:
    """The model as the attack sees it: vectors in, one-hot decisions out, queries counted.
    Classification reads one predict_proba call per batch (the decision: its argmax); regression,
    one predict call."""

    def __init__(self, model: Any, space: FeatureSpace, classes: list[str] | None, target_spread: float,
                 settings: AttackSettings, may_query: Callable[[], bool] = lambda: True) -> None:
        self.model, self.space, self.classes = model, space, classes
        self.target_spread, self.settings, self.queries = target_spread, settings, 0
        self.may_query = may_query
        self.calls, self.call_s = 0, 0.0
        # The nearest flipped point queried for the current row: (distance, its decoded frame row).
        self.nearest: tuple[float, pd.DataFrame] | None = None

    def labels(self, frame: pd.DataFrame) -> np.ndarray:
        """The decisions on `frame`, as class text, from one predict_proba call."""
        assert self.classes is not None  # classification only
        started = time.perf_counter()
        try:
            return decide(class_probabilities(self.model, frame, self.classes), self.classes).astype(str)
        finally:
            self.calls += 1
            self.call_s += time.perf_counter() - started

    def values(self, frame: pd.DataFrame) -> np.ndarray:
        """Regression: the predictions on `frame`, from one predict call."""
        started = time.perf_counter()
        try:
            return np.asarray(self.model.predict(frame), dtype=float)
        finally:
            self.calls += 1
            self.call_s += time.perf_counter() - started

    def decision(self, template: pd.DataFrame, mutable: np.ndarray,
                 reference: Any) -> Callable[..., np.ndarray]:
        """predict_fn for one row, given to ART's BlackBoxClassifier: classification, the one-hot of
        predict_proba's argmax over the classes; regression, the one-hot of (moved by less, moved by
        at least regression_share x the target's spread)."""

        original = self.space.encode(template)[0][0]

        def predict(vectors: np.ndarray) -> np.ndarray:
            if not self.may_query():
                raise OutOfTime
            n = len(vectors)
            self.queries += n
            frame = self.space.decode(vectors, pd.concat([template] * n, ignore_index=True),
                                      np.repeat(mutable, n, axis=0))
            if self.classes is None:
                moved = np.abs(self.values(frame) - float(reference))
                hit = moved >= self.settings.regression_share * self.target_spread
                self._keep_nearest(frame, hit, original)
                return np.eye(2)[hit.astype(int)]
            labels = self.labels(frame)
            self._keep_nearest(frame, labels != str(reference), original)
            index = {c: i for i, c in enumerate(self.classes)}
            return np.eye(len(self.classes))[[index.get(label, 0) for label in labels]]

        return predict


    def _keep_nearest(self, frame: pd.DataFrame, flipped: np.ndarray, original: np.ndarray) -> None:
        if not flipped.any():
            return
        rows = frame[flipped].reset_index(drop=True)
        encoded, _ = self.space.encode(rows)
        distances = [self.space.distance(original, vector)[0] for vector in encoded]
        best = int(np.argmin(distances))
        if self.nearest is None or distances[best] < self.nearest[0]:
            self.nearest = (distances[best], rows.iloc[[best]].reset_index(drop=True))


def attack_rows(model: Any, space: FeatureSpace, X: pd.DataFrame, train: pd.DataFrame, rows: list[int],
                classes: list[str] | None, target_spread: float, settings: AttackSettings,
                has_time: Callable[[], bool], may_query: Callable[[], bool] = lambda: True) -> AttackOutcome:
    """HopSkipJump on each of `rows` (positions in X) in turn, while `has_time()` (asked between
    rows) and `may_query()` (asked before each query: a row cut short keeps its nearest flip)."""
    # ART is imported here, not at the top: importing it imports torch and every attack (seconds),
    # which the registry, the report and a stage with adversarial_rows 0 should not pay.
    from art.attacks.evasion import HopSkipJump
    from art.estimators.classification import BlackBoxClassifier

    low, high = space.bounds(train)
    oracle = Oracle(model, space, classes, target_spread, settings, may_query)
    outcome = AttackOutcome([], len(rows), "")
    vectors, mutable = space.encode(X)
    attacks: list[RowAttack] = []
    found: list[pd.DataFrame] = []
    stop = f"all {len(rows)} planned rows attacked"
    np.random.seed(settings.seed)  # HopSkipJump draws from numpy's global generator
    logging.getLogger("art").setLevel(logging.ERROR)  # it logs every failed start as an error
    for position in rows:
        if not has_time():
            stop = f"time limit reached after {len(attacks)} of {len(rows)} planned rows"
            break
        started, before_queries, before_calls = time.perf_counter(), oracle.queries, oracle.calls
        template = X.iloc[[position]].reset_index(drop=True)
        row_mutable = mutable[[position]]
        original = vectors[[position]]
        attack = RowAttack(row=int(position))
        oracle.nearest = None
        try:
            if classes is None:
                reference = float(oracle.values(template)[0])
                attack.before, n_classes = f"{reference:.6g}", 2
            else:
                reference = oracle.labels(template)[0]
                attack.before, n_classes = reference, len(classes)
            # Coordinates the row cannot change (a missing cell) are pinned by a clip box of width
            # PINNED (ART refuses min == max); the decoder copies the original cell back anyway.
            row_low = np.where(row_mutable[0], low, original[0] - PINNED).astype(np.float32)
            row_high = np.where(row_mutable[0], high, original[0] + PINNED).astype(np.float32)
            classifier = BlackBoxClassifier(oracle.decision(template, row_mutable, reference),
                                            input_shape=(space.dimensions,), nb_classes=n_classes,
                                            clip_values=(row_low, row_high))
            hop = HopSkipJump(classifier, batch_size=settings.batch_size, targeted=False, norm=2,
                              max_iter=settings.max_iter, max_eval=settings.max_eval,
                              init_eval=settings.init_eval, init_size=settings.init_size, verbose=False)
            start = np.clip(original, row_low, row_high)
            try:
                moved = hop.generate(x=start.astype(np.float32))
                perturbed = space.decode(moved, template, row_mutable)
            except OutOfTime:
                stop = f"time limit reached during row {len(attacks) + 1} of {len(rows)} planned rows"
                attack.cut_short = True
                if oracle.nearest is None:  # nothing flipped yet: the row tells nothing, it is not kept
                    break
                perturbed = oracle.nearest[1]
            encoded, _ = space.encode(perturbed)
            if classes is None:
                after = float(oracle.values(perturbed)[0])
                attack.after = f"{after:.6g}"
                attack.flipped = abs(after - reference) >= settings.regression_share * target_spread
            else:
                attack.after = oracle.labels(perturbed)[0]
                attack.flipped = attack.after != attack.before
            if attack.flipped:
                attack.distance, attack.changed = space.distance(original[0], encoded[0])
                attack.perturbed = {c: _plain(perturbed.loc[0, c]) for c in attack.changed}
                found.append(perturbed)
        except NoProbabilities as exc:  # the model's own answer, not a failure: no row can be attacked
            outcome.not_applicable = str(exc)
            stop = f"not applicable: {exc}"
            break
        except Exception as exc:  # noqa: BLE001 - an attack that fails on a model is recorded; the rest goes on
            attack.error = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
        attack.queries = oracle.queries - before_queries
        attack.calls = oracle.calls - before_calls
        attack.wall_s = time.perf_counter() - started
        attacks.append(attack)
        if attack.cut_short:
            break
    outcome.attacks, outcome.stop_reason = attacks, stop
    outcome.boundary_rows = pd.concat(found, ignore_index=True) if found else None
    outcome.calls, outcome.call_s = oracle.calls, oracle.call_s
    return outcome


def _plain(value: Any) -> Any:
    """A cell as JSON can hold it."""
    if isinstance(value, np.generic):
        return value.item()
    return value
