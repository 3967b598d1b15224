"""Score over time (anytime curves): the result a job would have had, had its fit stopped earlier.

A fitted model that records its search's progress offers ``anytime_candidates()``
(tasks/frameworks/capabilities.py): each model it had ready, when, and its own validation score.
At each point in time the framework would have returned the best candidate by its validation
score among those ready; the harness scores that candidate on the test fold with the one metric
registry, exactly as the job's own predictions are scored. The last point is the model the job
returned, at the end of the fit, so it is the job's `result`.

`anytime_t95_s` / `anytime_t99_s`: the first time at which the curve had gained 95% / 99% of what the
whole fit gained over its first point (the share of the improvement, not of the score itself: for
a score like -RMSE, "95% of the final value" would mean nothing).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from tasks.frameworks.capabilities import AnytimeCandidate
from tasks.metrics import score
from tasks.vocabulary import RESULT

ANYTIME_FILE = "anytime.csv"
ANYTIME_METRIC = "anytime_result"  # the curve as an MLflow step metric (step = milliseconds of fit)
SHARES = {"anytime_t95_s": 0.95, "anytime_t99_s": 0.99}


def candidate_result(candidate: AnytimeCandidate, X_test: pd.DataFrame, y_test: pd.Series,
                     problem_type: str, metric: str, classes: Sequence[Any]) -> float:
    """The candidate's `result` on the test fold, by the harness's scoring."""
    predictions = candidate.predict(X_test)
    proba = candidate.predict_proba(X_test) if candidate.predict_proba is not None else None
    if proba is not None:
        proba = pd.DataFrame({str(label): proba[label].to_numpy(dtype=float) for label in classes})
        predictions = np.asarray([str(value) for value in predictions], dtype=object)
        y_test = y_test.astype(str)
    return float(score(problem_type, metric, y_test, predictions, proba, classes)[RESULT])


def series(candidates: list[AnytimeCandidate], fit_s: float, X_test: pd.DataFrame, y_test: pd.Series,
           problem_type: str, metric: str, classes: Sequence[Any], max_s: float = 60.0) -> pd.DataFrame:
    """elapsed_s, model (the one the framework would have returned then), result, validation.

    One row each time the pick changes, and a last row at `fit_s` with the model the job returned.
    Scoring stops after `max_s` seconds (a leaderboard of hundreds of models), or before a candidate
    whose model would cost more than the time left (`cost_s`, a refit); the rows so far stand.
    `source` says how each point's model was had (kept by the framework, refitted from its log).
    """
    ordered = sorted(candidates, key=lambda candidate: candidate.ready_s)
    final = next((candidate for candidate in ordered if candidate.final), None)
    scored: dict[str, float] = {}
    rows: list[dict[str, Any]] = []
    best: AnytimeCandidate | None = None
    started = time.monotonic()
    for candidate in ordered:
        if candidate.validation is None:
            continue
        if best is not None and best.validation is not None and candidate.validation <= best.validation:
            continue
        if time.monotonic() - started + candidate.cost_s > max_s:
            break
        best = candidate
        scored[candidate.name] = candidate_result(candidate, X_test, y_test, problem_type, metric, classes)
        rows.append({"elapsed_s": candidate.ready_s, "model": candidate.name,
                     RESULT: scored[candidate.name], "validation": candidate.validation,
                     "source": candidate.source})
    if final is not None:
        result = scored.get(final.name)
        if result is None:
            result = candidate_result(final, X_test, y_test, problem_type, metric, classes)
        rows.append({"elapsed_s": max(fit_s, final.ready_s), "model": final.name, RESULT: result,
                     "validation": final.validation if final.validation is not None else math.nan,
                     "source": final.source})
    return pd.DataFrame(rows, columns=["elapsed_s", "model", RESULT, "validation", "source"])


def time_to_share(curve: pd.DataFrame) -> dict[str, float]:
    """anytime_t95_s and anytime_t99_s of a curve (empty for an empty curve)."""
    if curve.empty:
        return {}
    first, final = float(curve[RESULT].iloc[0]), float(curve[RESULT].iloc[-1])
    found = {}
    for name, share in SHARES.items():
        target = first + share * (final - first)
        reached = curve[curve[RESULT] >= target - 1e-12]
        at = reached if not reached.empty else curve.tail(1)
        found[name] = float(at["elapsed_s"].iloc[0])
    return found
