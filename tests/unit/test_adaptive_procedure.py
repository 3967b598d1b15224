"""The adaptive procedure's error rate under repeated looks, on simulated folds with a known truth."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tasks.adaptive import best_across, compare, needs_more_folds, race

CONFIDENCE = 0.95
MIN_FOLDS, MAX_FOLDS = 2, 10
REPETITIONS = 1500


def _sequential_verdict(differences: np.ndarray, rope: float) -> tuple[str, int]:
    """Look after every fold from MIN_FOLDS on; stop at the first settled verdict (as a run does)."""
    for folds in range(MIN_FOLDS, len(differences) + 1):
        scores = {"a": dict(enumerate(differences[:folds])), "b": dict.fromkeys(range(folds), 0.0)}
        outcome = compare("simulated", "a", "b", scores, 1.0 - CONFIDENCE, rope)
        if outcome.settled:
            return outcome.verdict, folds
    return "open", len(differences)


def _simulate(true_difference: float, rope: float, seed: int) -> list[tuple[str, int]]:
    rng = np.random.default_rng(seed)
    draws = rng.normal(true_difference, 1.0, size=(REPETITIONS, MAX_FOLDS))
    return [_sequential_verdict(row, rope) for row in draws]


@pytest.mark.parametrize(("true_difference", "rope", "wrong"), [
    (0.0, 0.0, {"better", "worse"}),         # equal frameworks, no equivalence margin
    (0.0, 0.6, {"better", "worse"}),         # equal frameworks, a margin: only "equivalent" is right
    (0.4, 0.0, {"worse", "equivalent"}),     # A a little better
    (0.7, 0.5, {"worse"}),                   # A better by more than the margin
])
def test_error_rate_under_repeated_looks_stays_within_the_level(true_difference, rope, wrong):
    verdicts = _simulate(true_difference, rope, seed=41)
    errors = sum(verdict in wrong for verdict, _ in verdicts) / len(verdicts)
    assert errors <= (1.0 - CONFIDENCE) * 1.3, f"error rate {errors:.3f} over {len(verdicts)} repetitions"


def test_a_fixed_sample_test_rerun_after_each_round_would_exceed_the_level():
    # The simulation can see the inflation that the procedure avoids: a t-test at p < 0.05 after
    # every fold, on equal frameworks, declares a difference far more often than 5%.
    rng = np.random.default_rng(41)
    draws = rng.normal(0.0, 1.0, size=(REPETITIONS, MAX_FOLDS))
    rejected = np.zeros(REPETITIONS, dtype=bool)
    for folds in range(MIN_FOLDS, MAX_FOLDS + 1):
        head = draws[:, :folds]
        t_values = head.mean(axis=1) / (head.std(axis=1, ddof=1) / np.sqrt(folds))
        rejected |= np.abs(t_values) > stats.t.ppf(0.975, folds - 1)
    assert rejected.mean() > 0.1


def test_a_clear_pair_settles_early_and_a_close_one_stays_open():
    clear = _simulate(10.0, 0.0, seed=7)  # ten spreads apart
    assert all(verdict == "better" for verdict, _ in clear)
    assert np.median([folds for _, folds in clear]) <= 3
    close = _simulate(0.05, 0.0, seed=7)
    assert sum(verdict == "open" for verdict, _ in close) / len(close) > 0.8


def test_race_and_best_across_datasets():
    rng = np.random.default_rng(3)
    folds = range(6)
    clear = {"strong": {f: 0.9 + rng.normal(0, 0.01) for f in folds},
             "weak": {f: 0.5 + rng.normal(0, 0.01) for f in folds}}
    close = {"strong": {f: 0.8 + rng.normal(0, 0.05) for f in folds},
             "weak": {f: 0.8 + rng.normal(0, 0.05) for f in folds}}
    won, tied = race("clear", clear, CONFIDENCE), race("close", close, CONFIDENCE)
    assert won.settled and won.winner == "strong" and won.remaining == ("strong",)
    assert not tied.settled and tied.winner is None
    one_open = best_across([won, tied])
    assert not one_open.settled  # "weak" could still win "close": 1 win against 0 + 1 open
    assert best_across([won, won, tied]).leader == "strong"
    wanted = needs_more_folds({"clear": clear, "close": close}, CONFIDENCE, ["pairwise"])
    assert wanted == {("close", "strong"), ("close", "weak")}
    assert needs_more_folds({"clear": clear, "close": close}, CONFIDENCE, ["best"]) == wanted
    assert needs_more_folds({"a": clear, "b": clear, "close": close}, CONFIDENCE, ["best"]) == set()


def test_futility_stops_a_pair_the_last_round_could_not_settle():
    rng = np.random.default_rng(5)
    close = {"close": {"a": {f: 0.8 + rng.normal(0, 0.05) for f in range(3)},
                       "b": {f: 0.8 + rng.normal(0, 0.05) for f in range(3)}}}
    assert needs_more_folds(close, CONFIDENCE, ["pairwise"]) == {("close", "a"), ("close", "b")}
    assert needs_more_folds(close, CONFIDENCE, ["pairwise"], max_folds=4) == set()
    # a pair still on its way (clear mean, a little noise) goes on under futility
    on_its_way = {"d": {"a": {0: 0.9, 1: 0.7, 2: 0.95}, "b": dict.fromkeys(range(3), 0.5)}}
    assert needs_more_folds(on_its_way, CONFIDENCE, ["pairwise"], max_folds=10) == {("d", "a"), ("d", "b")}


def test_a_race_between_frameworks_out_of_contention_gets_no_folds():
    rng = np.random.default_rng(11)
    folds = range(4)

    def level(mean: float, spread: float = 0.01) -> dict[int, float]:
        return {f: mean + rng.normal(0, spread) for f in folds}

    # a wins d1 and d2, b wins d0 and is still racing a on d3 (winning it would tie a); c and d, who
    # won nothing, race only each other on d4: even winning it, neither could reach a's two wins.
    grid = {"d0": {"a": level(0.5), "b": level(0.9), "c": level(0.5), "d": level(0.5)},
            "d1": {"a": level(0.9), "b": level(0.5), "c": level(0.5), "d": level(0.5)},
            "d2": {"a": level(0.9), "b": level(0.5), "c": level(0.5), "d": level(0.5)},
            "d3": {"a": level(0.8, 0.05), "b": level(0.8, 0.05), "c": level(0.4), "d": level(0.4)},
            "d4": {"a": level(0.3), "b": level(0.3), "c": level(0.8, 0.05), "d": level(0.8, 0.05)}}
    races = [race(dataset, scores, CONFIDENCE) for dataset, scores in grid.items()]
    best = best_across(races)
    assert best.wins["a"] == 2 and not best.settled and best.contenders == {"a", "b"}
    assert needs_more_folds(grid, CONFIDENCE, ["best"]) == {("d3", "a"), ("d3", "b")}
    assert {("d4", "c"), ("d4", "d")} <= needs_more_folds(grid, CONFIDENCE, ["pairwise"])  # pairwise asks
