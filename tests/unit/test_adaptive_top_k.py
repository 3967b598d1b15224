"""The top k across datasets: its error rate under repeated looks on simulated folds with a known
truth, the cells it asks for, and its place in the report."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from tasks.adaptive import needs_more_folds, play_rounds, top_k
from tasks.report.adaptive import section
from tasks.report.markdown import markdown_table
from tasks.specs import AdaptiveSettings

CONFIDENCE = 0.95
MIN_FOLDS, MAX_FOLDS = 3, 10
REPETITIONS = 300
NAMES = ("a", "b", "c", "d", "e")


def _true_ranks(means: np.ndarray) -> dict[str, float]:
    """The expected fold mean rank when each result is its mean plus N(0, 1) noise, independent:
    1 + the chance each other framework's result is higher, averaged over the datasets."""
    ranks = dict.fromkeys(NAMES, 0.0)
    for per_dataset in means:
        for i, name in enumerate(NAMES):
            ranks[name] += 1.0 + sum(stats.norm.cdf((per_dataset[j] - per_dataset[i]) / np.sqrt(2.0))
                                     for j in range(len(NAMES)) if j != i)
    return {name: total / len(means) for name, total in ranks.items()}


def _misplaced(means: np.ndarray, k: int, seed: int) -> tuple[float, float]:
    """Over the repetitions: how often some look, after folds MIN_FOLDS to MAX_FOLDS, put a framework
    in (or out of) the top k wrongly, and how often the looks settled the top k."""
    truth = _true_ranks(means)
    rng = np.random.default_rng(seed)
    wrong = settled = 0
    for _ in range(REPETITIONS):
        draws = means[:, :, None] + rng.normal(0.0, 1.0, size=(*means.shape, MAX_FOLDS))
        grid = {f"d{d}": {name: dict(enumerate(draws[d, i])) for i, name in enumerate(NAMES)}
                for d in range(len(means))}
        for folds in range(MIN_FOLDS, MAX_FOLDS + 1):
            seen = {dataset: {name: {f: v for f, v in by_fold.items() if f < folds}
                              for name, by_fold in by_name.items()} for dataset, by_name in grid.items()}
            outcome = top_k(seen, k, CONFIDENCE)
            # in: fewer than k frameworks truly rank at least as well; out: k or more truly rank better
            if any(sum(truth[other] <= truth[name] for other in NAMES if other != name) >= k
                   for name in outcome.top) or any(
                    sum(truth[other] < truth[name] for other in NAMES) < k for name in outcome.out):
                wrong += 1
                break
            if outcome.settled:
                settled += 1
                break
    return wrong / REPETITIONS, settled / REPETITIONS


@pytest.mark.parametrize(("case", "k"), [("equal", 2), ("unequal", 2), ("unequal", 1)])
def test_error_rate_under_repeated_looks_stays_within_the_level(case: str, k: int) -> None:
    if case == "equal":  # every framework the same: any framework put in or out is an error
        means = np.zeros((4, len(NAMES)))
    else:  # a, b ahead; c close behind b; d, e far behind (in units of the fold-to-fold spread)
        means = np.array([[4.5, 1.6, 1.4, 0.0, -0.5], [4.0, 1.5, 1.0, 0.0, 0.2],
                          [4.5, 1.2, 1.5, -0.3, 0.0], [4.3, 1.4, 1.0, 0.1, -0.2]])
    wrong, settled = _misplaced(means, k, seed=41)
    assert wrong <= (1.0 - CONFIDENCE) * 1.3, f"{case}, k={k}: misplaced in {wrong:.3f} of repetitions"
    if case == "unequal" and k == 1:  # and it decides, not merely stays open: a is far ahead
        assert settled > 0.8


def test_the_top_k_settles_with_pooled_folds_and_then_asks_for_none() -> None:
    rng = np.random.default_rng(2)
    levels = {"strong": 0.9, "middle": 0.7, "weak": 0.5}
    grid = {f"d{d}": {name: {fold: level + float(rng.normal(0, 0.01)) for fold in range(4)}
                      for name, level in levels.items()} for d in range(3)}
    outcome = top_k(grid, 1, CONFIDENCE)
    assert outcome.folds == 4 and outcome.settled and outcome.top == ("strong",)
    assert set(outcome.out) == {"middle", "weak"} and outcome.mean_rank["strong"] == 1.0
    assert needs_more_folds(grid, CONFIDENCE, ["top_k"], k=1) == set()
    # After two folds nothing can be settled: every cell is wanted for the next fold
    early = {dataset: {name: {f: v for f, v in by_fold.items() if f < 2} for name, by_fold in by_name.items()}
             for dataset, by_name in grid.items()}
    assert not top_k(early, 1, CONFIDENCE).settled
    assert needs_more_folds(early, CONFIDENCE, ["top_k"], k=1) == {(d, n) for d in grid for n in levels}
    # the pooled folds are those every cell reached; a failed fold below them ranks last
    short = {**grid, "d0": {**grid["d0"], "strong": {0: 0.9, 2: 0.9}}}
    assert top_k(short, 1, CONFIDENCE).folds == 3


def test_rounds_and_report_give_the_top_k(tmp_path: Path) -> None:
    rng = np.random.default_rng(4)
    rows = [{"dataset": f"d{d}", "framework": name, "fold": fold, "seed": 0, "ok": True, "fit_s": 1.0,
             "status": "ok", "result": level + float(rng.normal(0, 0.01))}
            for d in range(3) for name, level in (("hgb", 0.9), ("rf", 0.895), ("constant", 0.5))
            for fold in range(6)]
    jobs = pd.DataFrame(rows)
    settings = AdaptiveSettings(confidence=CONFIDENCE, min_folds=3, max_folds=6, decide=["top_k"], top_k=2)
    lines = "\n".join(section(jobs, settings, tmp_path, markdown_table))
    assert "Top 2 across datasets: hgb, rf (in: hgb, rf; out: constant)" in lines
    evidence = pd.read_csv(tmp_path / "adaptive_top_k.csv")
    assert len(evidence) == len(list(combinations(["constant", "hgb", "rf"], 2)))
    one = AdaptiveSettings(confidence=CONFIDENCE, min_folds=3, max_folds=6, decide=["top_k"], top_k=1)
    assert "Still open at the last round: top 1 across datasets (hgb, rf undecided)." in "\n".join(
        section(jobs, one, tmp_path, markdown_table))
    grid = {f"d{d}": {name: {int(r.fold): float(r.result) for r in rows.itertuples()}
                      for name, rows in jobs[jobs["dataset"] == f"d{d}"].groupby("framework")}
            for d in range(3)}
    rounds = play_rounds(grid, confidence=CONFIDENCE, min_folds=3, max_folds=6, decide=["top_k"], k=2)
    assert rounds.top is not None and rounds.top.settled and rounds.jobs < 3 * 3 * 6
    # k = 1 after 5 folds: constant is out, hgb against rf is open. Futility stops every cell when the
    # 6th fold could not settle that pair, not when 40 folds could.
    five = {dataset: {name: {f: v for f, v in by_fold.items() if f < 5} for name, by_fold in by_name.items()}
            for dataset, by_name in grid.items()}
    open_top = top_k(five, 1, CONFIDENCE)
    assert open_top.out == ("constant",) and open_top.undecided == ("hgb", "rf")
    assert needs_more_folds(five, CONFIDENCE, ["top_k"], max_folds=6, k=1) == set()
    assert len(needs_more_folds(five, CONFIDENCE, ["top_k"], max_folds=40, k=1)) == 9
