"""Benchmark: adaptive benchmarking replayed on full grids already run.

For each grid (a results.csv in AMLB's format: task, framework, fold, result higher-is-better, and
`constraint` to tell grids apart), the rounds of tasks/adaptive.py are played on the recorded folds
and their decisions set against the full grid's (the same procedure on every fold). Prints, per grid
and setting: how often the pairwise verdicts agree, how often the per-dataset best agrees, the best
across datasets of each, how often each framework's place in the top k across datasets (in, out,
open) agrees and the top k itself, and the share of the full grid's jobs the rounds needed.

The default grid is AMLB's published per-fold results (tests/fixtures/amlb_per_fold_8c4h.csv, from
openml/automlbenchmark's reports/old/input/results_{small,medium}-8c4h[_ref].csv). A full grid run
here replays the same way: its report folder holds results.csv in this format.
Run: `python -m bench.bench_adaptive [--results FILE] [--confidence 0.95] [--min-folds 3] [--rope 0.01]
[--top-k 1 3]`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import pandas as pd

from tasks.adaptive import FoldScores, Grid, Rounds, compare, play_rounds
from tasks.report.adaptive import grid_of

AMLB_PER_FOLD = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "amlb_per_fold_8c4h.csv"
SMOKE_ARGS: tuple[str, ...] = ()  # the whole replay takes seconds


@dataclass(frozen=True)
class Agreement:
    grid: str
    decide: str
    futility: bool
    cells: int  # decisions: (dataset, pair) for pairwise, datasets for best, frameworks for top k
    agree: float  # share of those equal to the full grid's
    contradict: int  # settled in both, differently (not merely open in one)
    # of those, opposite signs (better against worse); the rest are equivalent against better or worse,
    # which hold together when the true difference is within the rope but not 0
    opposite: int
    across: str  # adaptive's / the full grid's best or top k ("open" when not settled); "-" for pairwise
    job_share: float

    def row(self) -> dict[str, object]:
        return {"grid": self.grid, "decide": self.decide, "futility": self.futility, "cells": self.cells,
                "same decision": f"{self.agree:.1%}", "contradicted": self.contradict,
                "opposite": self.opposite,
                "across datasets (adaptive / full)": self.across, "jobs": f"{self.job_share:.1%}"}


def grids_of(results: pd.DataFrame) -> dict[str, Grid]:
    """constraint -> its grid (the mean over seeds: a report's results.csv has a row per seed); failed
    folds, without a result, are left out."""
    jobs = results.rename(columns={"task": "dataset"}).assign(ok=results["result"].notna())
    if "constraint" not in jobs:
        jobs = jobs.assign(constraint="grid")
    return {str(constraint): grid_of(rows) for constraint, rows in jobs.groupby("constraint")}


def _leader(rounds: Rounds) -> str:
    if rounds.top is not None:
        return "+".join(rounds.top.top) if rounds.top.settled else "open"
    return rounds.best.leader if rounds.best.settled and rounds.best.leader else "open"


def _places(rounds: Rounds) -> dict[object, object]:
    """framework -> in, out or open (of the top k)."""
    assert rounds.top is not None
    return {name: "in" if name in rounds.top.top else "out" if name in rounds.top.out else "open"
            for name in rounds.top.mean_rank}


def agreement(name: str, grid: Grid, *, confidence: float, min_folds: int, rope: float,
              decide: Sequence[str], futility: bool, k: int | None = None) -> Agreement:
    max_folds = max(fold for by_framework in grid.values() for by_fold in by_framework.values()
                    for fold in by_fold) + 1
    full = play_rounds(grid, confidence=confidence, min_folds=max_folds, max_folds=max_folds, decide=decide,
                       rope=rope, k=k)
    rounds = play_rounds(grid, confidence=confidence, min_folds=min_folds, max_folds=max_folds, decide=decide,
                         rope=rope, futility=futility, k=k)
    truth: dict[object, object]
    seen: dict[object, object]
    unsettled: object
    if "top_k" in decide:
        truth, seen, unsettled = _places(full), _places(rounds), "open"
    elif "pairwise" in decide:
        truth = {(p.dataset, p.first, p.second): p.verdict for p in full.pairs}
        seen = {(p.dataset, p.first, p.second): p.verdict for p in rounds.pairs}
        unsettled = "open"
    else:  # per dataset: the winner, or still open (None, False), or a settled tie (None, True)
        truth = {race.dataset: (race.winner, race.settled) for race in full.races}
        seen = {race.dataset: (race.winner, race.settled) for race in rounds.races}
        unsettled = (None, False)
    contradict = sum(seen[key] != value and unsettled not in (seen[key], value)
                     for key, value in truth.items())
    opposite = sum({seen[key], value} in ({"better", "worse"}, {"in", "out"}) for key, value in truth.items())
    return Agreement(
        grid=name, decide=f"top_k (k={k})" if k else "+".join(decide), futility=futility, cells=len(truth),
        agree=sum(seen[key] == value for key, value in truth.items()) / len(truth), contradict=contradict,
        opposite=opposite,
        across=f"{_leader(rounds)} / {_leader(full)}" if "pairwise" not in decide else "-",
        job_share=rounds.jobs / full.jobs)


def _settled_after(first: FoldScores, second: FoldScores, folds: int, alpha: float, rope: float) -> bool:
    cut = {name: {fold: value for fold, value in scores.items() if fold < folds}
           for name, scores in (("first", first), ("second", second))}
    return compare("", "first", "second", cut, alpha, rope).settled


def oracle_share(grid: Grid, *, confidence: float, min_folds: int, rope: float) -> float:
    """The share of jobs pairwise needs with an oracle futility: a pair the full grid leaves open stops
    after the first round, and each cell runs until the last of its pairs that the full grid settles
    first settles. A stopping rule that sees only the folds run cannot beat it with this sequence
    and still agree on every pair the full grid settles: a floor, not a setting (it reads the truth)."""
    max_folds = max(fold for by_framework in grid.values() for by_fold in by_framework.values()
                    for fold in by_fold) + 1
    alpha, jobs = 1.0 - confidence, 0
    for by_framework in grid.values():
        needed = dict.fromkeys(by_framework, min_folds)
        for first, second in combinations(sorted(by_framework), 2):
            pair = (by_framework[first], by_framework[second])
            if _settled_after(*pair, max_folds, alpha, rope):
                settles = next(folds for folds in range(min_folds, max_folds + 1)
                               if _settled_after(*pair, folds, alpha, rope))
                needed[first], needed[second] = max(needed[first], settles), max(needed[second], settles)
        jobs += sum(needed.values())
    return jobs / (sum(len(by_framework) for by_framework in grid.values()) * max_folds)


def main(argv: list[str] | None = None) -> list[Agreement]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_adaptive",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=AMLB_PER_FOLD,
                        help="per-fold results in AMLB's results.csv format (default: AMLB's 8c4h)")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--min-folds", type=int, default=3)
    parser.add_argument("--rope", type=float, default=0.01,
                        help="differences of result within +-rope count as equal")
    parser.add_argument("--top-k", type=int, nargs="*", default=[1, 2, 3],
                        help="the k of each top-k replay (k of a grid's frameworks or more: skipped)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    found = []
    for name, grid in grids_of(pd.read_csv(args.results)).items():
        frameworks = len({framework for by_framework in grid.values() for framework in by_framework})
        settings: list[tuple[list[str], int | None]] = [(["pairwise"], None), (["best"], None)]
        settings += [(["top_k"], k) for k in args.top_k if 1 <= k < frameworks]
        for decide, k in settings:
            for futility in (False, True):
                found.append(agreement(name, grid, confidence=args.confidence, min_folds=args.min_folds,
                                       rope=args.rope, decide=decide, futility=futility, k=k))
    table = pd.DataFrame([entry.row() for entry in found])
    print(f"{args.results.name}: confidence {args.confidence}, min_folds {args.min_folds}, rope {args.rope}; "
          "the truth is the same procedure on every fold of the grid")
    print(table.to_string(index=False))
    for name, grid in grids_of(pd.read_csv(args.results)).items():
        floor = oracle_share(grid, confidence=args.confidence, min_folds=args.min_folds, rope=args.rope)
        print(f"{name}: pairwise with an oracle futility (it reads the full grid: a floor) needs {floor:.1%} "
              "of the jobs")
    return found


if __name__ == "__main__":
    main()
