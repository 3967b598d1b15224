"""Generation steered by effectiveness: more cases near the decision boundary while too few are.

Random corruptions mostly land far from the boundary, where they test little. While the boundary
density of the generated cases (signals.boundary_density) is under its target and time remains,
this adds cases where the signal is lowest: it takes pairs of test rows that the model puts in
different classes, the rows with the smallest margins first, and bisects the segment between each
pair in the feature space (one predict call per step for the whole batch) until it sits on the
boundary. The stop reason names the signal that reached its target, or the time, or the cap.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from tasks.evaluations.robustness.signals import Observation, boundary_density
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


def steer(model: Any, space: FeatureSpace, X: pd.DataFrame, classes: list[str], observed: list[Observation],
          settings: SteerSettings, has_time: Callable[[], bool]) -> SteerOutcome:
    """Adds boundary cases to `observed` (in place) until its boundary density reaches the target."""
    before = boundary_density(observed, settings.delta)
    if not space.dimensions:
        return SteerOutcome(before, before, float("nan"), 0, 0,
                            "no numeric or categorical feature to move along")
    vectors, mutable = space.encode(X)
    proba = np.asarray(model.predict_proba(X), dtype=float)
    labels = np.asarray(classes)[proba.argmax(axis=1)]
    clean = Observation.of(proba, None, None)
    if len(set(labels)) < 2:
        return SteerOutcome(before, before, float("nan"), 0, 0,
                            "the model puts every test row in one class: no boundary to steer towards")
    rng = np.random.default_rng(settings.seed)
    order = np.argsort(clean.margin, kind="stable")  # lowest margin first: where the signal is lowest
    added, rounds, first_added = 0, 0, len(observed)
    reason = f"{settings.max_rounds} rounds done"
    while rounds < settings.max_rounds:
        density = boundary_density(observed, settings.delta)
        if np.isfinite(density) and density >= settings.target:
            reason = f"boundary density {density:.2f} reached its target {settings.target:.2f}"
            break
        if not has_time():
            reason = f"time limit reached (boundary density {density:.2f}, target {settings.target:.2f})"
            break
        start = (rounds * settings.batch) % len(order)
        firsts = np.roll(order, -start)[: settings.batch]
        seconds = np.array([_partner(i, labels, rng) for i in firsts])
        near, far = vectors[firsts].astype(float), vectors[seconds].astype(float)
        keep = mutable[firsts] & mutable[seconds]
        low, high = np.zeros(len(firsts)), np.ones(len(firsts))
        templates = X.iloc[firsts].reset_index(drop=True)
        for _ in range(settings.steps):
            middle = (low + high) / 2
            frame = space.decode(near + middle[:, None] * (far - near), templates, keep)
            same = np.asarray(model.predict(frame)).astype(str) == labels[firsts]
            low, high = np.where(same, middle, low), np.where(same, high, middle)
        # The two ends of the last bracket straddle the boundary; a tree ensemble's probability jumps
        # there, so the end with the smaller margin is the case kept (both cost one predict call).
        step = far - near
        ends = space.decode(np.vstack([near + low[:, None] * step, near + high[:, None] * step]),
                            pd.concat([templates, templates], ignore_index=True), np.vstack([keep, keep]))
        both = Observation.of(np.asarray(model.predict_proba(ends), dtype=float), None, None)
        n = len(firsts)
        closer = both.margin[:n] <= both.margin[n:]
        observed.append(Observation(np.where(closer, both.margin[:n], both.margin[n:]),
                                    np.where(closer, both.confidence[:n], both.confidence[n:]), None))
        added += len(firsts)
        rounds += 1
    else:
        density = boundary_density(observed, settings.delta)
        if np.isfinite(density) and density >= settings.target:
            reason = f"boundary density {density:.2f} reached its target {settings.target:.2f}"
    return SteerOutcome(before, boundary_density(observed, settings.delta),
                        boundary_density(observed[first_added:], settings.delta), added, rounds, reason)


def _partner(row: int, labels: np.ndarray, rng: np.random.Generator) -> int:
    """A random row the model puts in another class than `row`."""
    others = np.flatnonzero(labels != labels[row])
    return int(rng.choice(others))
