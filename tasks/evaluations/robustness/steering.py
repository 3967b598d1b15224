"""Generation steered by effectiveness: more cases where a signal is under its target.

Two signals steer, in one loop (`steer_jointly`): each round goes to the signal furthest under its
target (relative to the target), until every signal reaches its target, or time runs out, or
each has done its rounds. The stop reason names the signal that reached its target, or the time,
or the cap.

- Boundary density. Random corruptions mostly land far from the boundary, where they test little.
  While the boundary density of the generated cases (signals.boundary_density) is under its
  target, this takes pairs of test rows that the model puts in different classes, the rows with
  the smallest margins first, and bisects the segment between each pair in the feature space (one
  predict call per step for the whole batch) until it sits on the boundary.
- Anomaly capture. The AUROC of (1 - confidence) for telling wrong predictions from right ones is
  a property of the model, which no choice of cases can honestly raise; what the cases decide is
  where it is measured. While it is under its target, this draws new copies (other seeds) of the
  corruption cells where the model's confidence flags its own failures worst: the cells with the
  lowest AUROC of their own, then cells whose rows are all wrong (nothing there separates), never
  cells the model gets all right. Those cells hold the confidently wrong predictions, the
  failures a user trusting the scores would miss, so generation hunts them; their truth is the
  row's label (a corrupted row keeps it), so the AUROC stays an honest measure of that mix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from tasks.evaluations.robustness.adversarial import class_probabilities, decide
from tasks.evaluations.robustness.signals import (
    Observation,
    anomaly_capture,
    boundary_density,
    capture_by_source,
)
from tasks.evaluations.robustness.space import FeatureSpace


@dataclass(frozen=True)
class SteerSettings:
    delta: float = 0.1  # margin under which a case is "near the boundary"
    target: float = 0.3  # boundary density to reach
    batch: int = 32  # pairs per round
    steps: int = 6  # bisection steps per round (segment / 2**steps)
    max_rounds: int = 20
    seed: int = 0


@dataclass
class SteerOutcome:
    density_before: float  # over the cases generated before steering
    density_after: float  # over every generated case, the steered ones included
    density_steered: float  # over the steered cases alone
    cases: int  # boundary cases added
    rounds: int
    stop_reason: str


class BoundarySteer:
    """One round at a time: a batch of test-row pairs bisected onto the decision boundary."""

    name = "boundary density"

    def __init__(self, model: Any, space: FeatureSpace, X: pd.DataFrame, classes: list[str],
                 observed: list[Observation], settings: SteerSettings) -> None:
        self.model, self.space, self.X, self.observed, self.settings = model, space, X, observed, settings
        self.target, self.cases, self.rounds = settings.target, 0, 0
        self.added: list[Observation] = []  # its own cases (the other signals' go to `observed` too)
        self.density_before = boundary_density(observed, settings.delta)
        self.unable = ""
        if not space.dimensions:
            self.unable = "no numeric or categorical feature to move along"
            return
        self.vectors, self.mutable = space.encode(X)
        self.classes = list(classes)
        proba = class_probabilities(model, X, self.classes)
        self.labels = decide(proba, self.classes).astype(str)
        if len(set(self.labels)) < 2:
            self.unable = "the model puts every test row in one class: no boundary to steer towards"
            return
        self.rng = np.random.default_rng(settings.seed)
        # Lowest margin first: where the signal is lowest.
        self.order = np.argsort(Observation.of(proba, None, None).margin, kind="stable")

    def signal(self) -> float:
        return boundary_density(self.observed, self.settings.delta)

    def exhausted(self) -> bool:
        return bool(self.unable) or self.rounds >= self.settings.max_rounds

    def step(self) -> None:
        settings, space = self.settings, self.space
        start = (self.rounds * settings.batch) % len(self.order)
        firsts = np.roll(self.order, -start)[: settings.batch]
        seconds = np.array([_partner(i, self.labels, self.rng) for i in firsts])
        near, far = self.vectors[firsts].astype(float), self.vectors[seconds].astype(float)
        keep = self.mutable[firsts] & self.mutable[seconds]
        low, high = np.zeros(len(firsts)), np.ones(len(firsts))
        templates = self.X.iloc[firsts].reset_index(drop=True)
        for _ in range(settings.steps):
            middle = (low + high) / 2
            frame = space.decode(near + middle[:, None] * (far - near), templates, keep)
            same = _decisions(self.model, frame, self.classes) == self.labels[firsts]
            low, high = np.where(same, middle, low), np.where(same, high, middle)
        # The two ends of the last bracket straddle the boundary; a tree ensemble's probability jumps
        # there, so the end with the smaller margin is the case kept (both cost one predict call).
        step = far - near
        ends = space.decode(np.vstack([near + low[:, None] * step, near + high[:, None] * step]),
                            pd.concat([templates, templates], ignore_index=True), np.vstack([keep, keep]))
        both = Observation.of(class_probabilities(self.model, ends, self.classes), None, None)
        n = len(firsts)
        closer = both.margin[:n] <= both.margin[n:]
        found = Observation(np.where(closer, both.margin[:n], both.margin[n:]),
                            np.where(closer, both.confidence[:n], both.confidence[n:]), None)
        self.observed.append(found)
        self.added.append(found)
        self.cases += n
        self.rounds += 1

    def outcome(self, reason: str) -> SteerOutcome:
        return SteerOutcome(self.density_before, self.signal(),
                            boundary_density(self.added, self.settings.delta),
                            self.cases, self.rounds, reason)


def _decisions(model: Any, frame: pd.DataFrame, classes: list[str]) -> np.ndarray:
    """The class of highest probability per row, as text: the decision the margin measures, read
    through predict_proba alone (one call), since a framework's predict may apply a threshold of
    its own (H2O's max-F1 threshold on binary problems)."""
    return decide(class_probabilities(model, frame, classes), classes).astype(str)


@dataclass(frozen=True)
class AnomalySettings:
    target: float = 0.7  # anomaly-capture AUROC under which generation goes on
    cells: int = 2  # corruption cells drawn again per round, lowest signal first
    max_rounds: int = 10
    first_draw: int = 1000  # draw numbers of the steered copies start here (new seeds, never a curve's)


@dataclass
class AnomalyOutcome:
    auroc_before: float  # over the labelled cases generated before steering
    auroc_after: float  # over every labelled case, the steered ones included
    auroc_steered: float  # over the steered cases alone
    cases: int  # corrupted copies added
    rows: int  # labelled rows they hold
    rounds: int
    stop_reason: str
    cells: list[str] = field(default_factory=list)  # the cells drawn again, in order


class AnomalySteer:
    """One round at a time: new draws of the corruption cells whose own anomaly capture is lowest."""

    name = "anomaly capture"

    def __init__(self, observed: list[Observation], run_cell: Callable[[tuple[str, str, float], int], None],
                 settings: AnomalySettings) -> None:
        self.observed, self.run_cell, self.settings = observed, run_cell, settings
        self.target, self.cases, self.rounds = settings.target, 0, 0
        self.auroc_before = anomaly_capture(observed)
        self.added: list[Observation] = []  # its own cases, tagged by their cell
        self.cells: list[str] = []
        self.draws: dict[tuple[str, str, float], int] = {}
        self.unable = "" if self.weakest() else "no corrupted case with a known truth to draw again"

    def signal(self) -> float:
        return anomaly_capture(self.observed)

    def exhausted(self) -> bool:
        return bool(self.unable) or self.rounds >= self.settings.max_rounds

    def weakest(self) -> list[tuple[str, str, float]]:
        """Cells lowest signal first: their own AUROC; all wrong counts as 0.5 (confidence separates
        nothing there); cells the model gets all right are never chosen (no failure to flag)."""
        ranked = []
        for source, (auroc, wrong, _rows) in capture_by_source(self.observed).items():
            if wrong:
                ranked.append((auroc if np.isfinite(auroc) else 0.5, -wrong, source))
        return [source for *_, source in sorted(ranked, key=lambda r: (r[0], r[1], str(r[2])))]

    def step(self) -> None:
        chosen = self.weakest()[: self.settings.cells]
        if not chosen:
            self.unable = "every corrupted case is predicted right: no failure to flag"
            return
        for source in chosen:
            draw = self.settings.first_draw + self.draws.get(source, 0)
            self.draws[source] = self.draws.get(source, 0) + 1
            before = len(self.observed)
            self.run_cell(source, draw)
            self.added += [o for o in self.observed[before:] if o.source == source]
            self.cells.append(f"{source[0]} on {source[1]} at {source[2]:g}")
            self.cases += 1
        self.rounds += 1

    def outcome(self, reason: str) -> AnomalyOutcome:
        rows = sum(len(o.correct) for o in self.added if o.correct is not None)
        return AnomalyOutcome(self.auroc_before, self.signal(), anomaly_capture(self.added), self.cases, rows,
                              self.rounds, reason, self.cells)


Steerer = BoundarySteer | AnomalySteer


def steer_jointly(steerers: list[Steerer], has_time: Callable[[], bool]) -> dict[str, str]:
    """Rounds while any signal is under its target and time remains, each round to the signal
    furthest under its target (shortfall / target; an unmeasured signal counts as zero). Returns
    each signal's stop reason."""
    reasons: dict[str, str] = {}
    while True:
        shortfalls = []
        for steerer in steerers:
            if steerer.name in reasons:
                continue
            value, target = steerer.signal(), steerer.target
            shown = f"{value:.2f}" if np.isfinite(value) else "unmeasured"
            if np.isfinite(value) and value >= target:
                reasons[steerer.name] = f"{steerer.name} {shown} reached its target {target:.2f}"
            elif steerer.unable:
                reasons[steerer.name] = (f"{steerer.name} {shown} under its target {target:.2f}: "
                                         f"{steerer.unable}")
            elif steerer.exhausted():
                reasons[steerer.name] = (f"{steerer.name} {shown} under its target {target:.2f} after "
                                         f"{steerer.rounds} rounds")
            else:
                measured = value if np.isfinite(value) else 0.0
                shortfalls.append(((target - measured) / max(target, 1e-9), steerer))
        if not shortfalls:
            return reasons
        if not has_time():
            for _, steerer in shortfalls:
                value = steerer.signal()
                shown = f"{value:.2f}" if np.isfinite(value) else "unmeasured"
                reasons[steerer.name] = (f"time limit reached ({steerer.name} {shown}, target "
                                         f"{steerer.target:.2f})")
            return reasons
        max(shortfalls, key=lambda pair: pair[0])[1].step()


def steer(model: Any, space: FeatureSpace, X: pd.DataFrame, classes: list[str], observed: list[Observation],
          settings: SteerSettings, has_time: Callable[[], bool]) -> SteerOutcome:
    """Adds boundary cases to `observed` (in place) until its boundary density reaches the target."""
    boundary = BoundarySteer(model, space, X, classes, observed, settings)
    reasons = steer_jointly([boundary], has_time)
    return boundary.outcome(reasons[boundary.name])


def _partner(row: int, labels: np.ndarray, rng: np.random.Generator) -> int:
    """A random row the model puts in another class than `row`."""
    others = np.flatnonzero(labels != labels[row])
    return int(rng.choice(others))
