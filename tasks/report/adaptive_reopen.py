"""Reopening in adaptive benchmarking: a cell the previous execution had settled gets folds again,
up to `max_folds`, when this run's rounds show its result regressed since then.

"Regressed" is what the nightly's comparison calls a regression of a cell (tasks/report/compare.py:
worse by the result threshold, 2% by default, and out of the baseline's noise), here on the folds
both executions ran, so that a fold's difficulty is not taken for a change. Reopening only adds
folds: every decision still comes from the anytime-valid procedure, so its error rate holds.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import pandas as pd

from tasks.adaptive import Cell, Grid, play_rounds
from tasks.report.compare import Thresholds, result_regressed
from tasks.specs import AdaptiveSettings
from tasks.vocabulary import RESULT


def settled_cells(grid: Grid, settings: AdaptiveSettings, reopened: Collection[Cell] = ()) -> set[Cell]:
    """The cells an execution's rounds settled (its recorded results replayed with its settings); the
    cells it had reopened itself ran to its last round, so they are not among them."""
    last_fold = max((fold for by_framework in grid.values() for by_fold in by_framework.values()
                     for fold in by_fold), default=-1)
    max_folds = settings.max_folds or last_fold + 1
    if max_folds < settings.min_folds:  # fewer folds than one round: nothing was settled by rounds
        return set()
    rounds = play_rounds(grid, confidence=settings.confidence, min_folds=settings.min_folds,
                         max_folds=max_folds, decide=settings.decide, rope=settings.rope,
                         futility=settings.futility, reopened=reopened, k=settings.top_k)
    return {cell for cell, settled_in in rounds.settled_at.items() if settled_in is not None}


def regressed_cells(previous: Grid, current: Grid, cells: Iterable[Cell],
                    thresholds: Thresholds | None = None) -> set[Cell]:
    """Of `cells`, those whose result now is worse than the previous execution's on the same folds,
    beyond the nightly's regression threshold. A cell with no result now (every job failed) is left
    out: more folds of a failing cell would tell nothing new, and the nightly reports it anyway."""
    found = set()
    for dataset, framework in cells:
        before = previous.get(dataset, {}).get(framework, {})
        now = current.get(dataset, {}).get(framework, {})
        folds = sorted(set(before) & set(now))
        if not folds:
            continue
        baseline = pd.DataFrame({"fold": folds, RESULT: [before[fold] for fold in folds]})
        candidate = pd.DataFrame({"fold": folds, RESULT: [now[fold] for fold in folds]})
        if result_regressed(baseline, candidate, thresholds):
            found.add((dataset, framework))
    return found
