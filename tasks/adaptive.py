"""Adaptive benchmarking's sequential procedure: which comparisons are settled after each round of folds.

The procedure is an anytime-valid confidence sequence on the mean per-fold paired difference of two
frameworks' results on one dataset (the "safe" t-test's confidence sequence). After n folds, with
mean difference m, standard deviation s and v = n - 1 degrees of freedom, the interval is
m +- t_n * s / sqrt(n), where t_n is the |t| at which the Bayes factor of a one-sample t-test with a
right-Haar prior on the scale and a normal prior N(0, g) on the standardized effect reaches 1 / alpha:

    ((1 + t^2 / v) / (1 + t^2 / (v c)))^((v + 1) / 2) = sqrt(c) / alpha,   c = 1 + n g.

Under "the true mean difference is d", that Bayes factor (on the differences shifted by d) is a test
martingale for every scale, so by Ville's inequality the interval misses d at ANY fold, looked at
after every round, with probability at most alpha. That is why this and not a fixed-sample t-test
re-run after each round: the latter's error grows with the number of looks (the unit test shows both).

Why this procedure rather than the others the field uses:
- Hoeffding/Bernstein races need a known range of the differences; a benchmark's metrics have none
  that is tight (RMSE), and with 10 folds Hoeffding decides nothing.
- A Bayesian sign test with a ROPE states a posterior, not an error rate under repeated looks, and a
  sign test needs 5+ folds before any verdict at 95%.
- The t-based sequence is scale-free (any metric), decides a clear pair after 3 folds at 95%, and
  gives three verdicts: better, worse, and, with a region of practical equivalence (`rope`), equal.

Decisions, over per-fold results (higher is better, paired by fold):
- pairwise, per dataset: does A beat B? `equivalent` once the interval lies inside [-rope, rope],
  else `better`/`worse` once it leaves 0, else `open`. Each pair holds its own `1 - confidence`.
- best, per dataset: a race. A framework leaves the race once another is settled better; the race
  is settled when every pair still in it is settled. Its pairs use Bonferroni's `alpha / pairs`, so
  the whole race errs with probability at most alpha.
- best, across datasets: the framework that wins the most datasets; settled once no other
  framework, winning every open race it is still in, could reach the leader's wins (it is wrong only
  if some dataset's race is). A framework that could not is out of contention: a race's pairs between
  two such frameworks get no more folds, since no verdict of theirs can change who leads.

- top k, across datasets: which k frameworks rank best. A framework's rank on a fold of a dataset is
  1 + the frameworks with a better result on that fold (+ half those within `rope` of it; a failed
  fold ranks below every result); the fold's mean rank is its mean over the datasets. The ranking
  is by the expected fold mean rank. Per pair of frameworks, the same confidence sequence runs on the
  per-fold differences of their fold mean ranks (one value per fold, every dataset in it: the
  datasets are independent, so the folds' values are independent draws, and averaging over datasets
  makes them near normal). Its pairs use Bonferroni's `alpha / pairs`. A framework is in once it
  is settled better than frameworks - k others, out once k others are settled better than it; the
  decision is settled when every framework is in or out, and wrong only if some pair's interval is.
  While it is open every cell gets the next fold: each framework's fold ranks take every result.

Which cells get the next fold is decided per (dataset, framework) cell from the results seen so far.
Each interval holds at every number of folds at once, so it holds at whatever fold a data-dependent
rule stops its cells: stopping cells, races or pairs early keeps every error rate above.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

# The prior variance g of the standardized effect (mean difference / its spread over folds). Between
# AutoML frameworks that spread is small and effects are large (hgb against a constant: tens of
# spreads), so a wide prior: g = 10 lets a clear pair settle after 3 folds at 95% (n g large enough).
PRIOR_EFFECT_VARIANCE = 10.0

# Futility (opt-in): an open pair stops when even a mean difference this many times the one seen so far,
# with the same spread, would not settle it by the last round (bench/bench_adaptive.py chose 1.5).
FUTILITY_SLACK = 1.5
Verdict = Literal["better", "worse", "equivalent", "open"]
# What a suite may ask to settle (its `adaptive.decide` list).
Decision = Literal["pairwise", "best", "top_k"]
DECISIONS: tuple[Decision, ...] = ("pairwise", "best", "top_k")
DEFAULT_DECISIONS: tuple[Decision, ...] = ("pairwise", "best")  # top_k needs its k
ACROSS = "(across datasets)"  # the `dataset` of a top-k pair: its folds pool every dataset

FoldScores = Mapping[int, float]  # fold -> result (higher is better)
Cell = tuple[str, str]  # (dataset, framework)


@dataclass(frozen=True)
class Interval:
    """The confidence sequence's interval on the mean difference after `folds` paired folds."""

    folds: int
    mean: float
    low: float
    high: float
    std: float  # of the per-fold differences (nan under 2 folds)


@dataclass(frozen=True)
class PairOutcome:
    """A against B on one dataset: the verdict is A's (A is `better` than B, ...)."""

    dataset: str
    first: str
    second: str
    verdict: Verdict
    interval: Interval
    alpha: float

    @property
    def settled(self) -> bool:
        return self.verdict != "open"

    def could_settle_by(self, max_folds: int | None, rope: float = 0.0) -> bool:
        """Whether more folds, up to `max_folds`, could settle this open pair if the differences went
        on as they have (the same spread, a mean up to FUTILITY_SLACK times larger). A pair that could
        not stops as open (futility): that saves folds and claims nothing, so the error rate holds;
        the price is a pair the full grid would have settled after all (see the replay)."""
        bounds = self.interval
        if max_folds is None or not 1 < bounds.folds < max_folds:
            return max_folds is None or bounds.folds < max_folds
        half = critical_t(max_folds, self.alpha) * bounds.std / math.sqrt(max_folds)
        return FUTILITY_SLACK * abs(bounds.mean) > half or abs(bounds.mean) + half / FUTILITY_SLACK <= rope


@dataclass(frozen=True)
class RaceOutcome:
    """Which framework is best on one dataset; `winner` is None while open or when several tie."""

    dataset: str
    remaining: tuple[str, ...]  # still in the race (not settled worse than another)
    winner: str | None
    settled: bool
    pairs: tuple[PairOutcome, ...]


@dataclass(frozen=True)
class BestAcross:
    """The framework that wins the most datasets, and whether the open datasets could change that."""

    leader: str | None
    wins: dict[str, int]
    open_datasets: tuple[str, ...]
    settled: bool
    # Frameworks that could still lead: their wins plus the open races they are still in reach the
    # most wins any framework has. The others are out of contention: no open race can make them lead.
    contenders: frozenset[str] = frozenset()


def critical_t(folds: int, alpha: float, prior_variance: float = PRIOR_EFFECT_VARIANCE) -> float:
    """|t| above which the sequence excludes a mean difference after `folds` folds (inf: not yet)."""
    if folds < 2:
        return math.inf
    dof = folds - 1
    spread = 1.0 + folds * prior_variance
    ratio = (math.sqrt(spread) / alpha) ** (2.0 / (dof + 1))
    if ratio >= spread:  # the Bayes factor cannot reach 1/alpha with this few folds, however clear
        return math.inf
    return math.sqrt(dof * (ratio - 1.0) / (1.0 - ratio / spread))


def interval(differences: Sequence[float], alpha: float,
             prior_variance: float = PRIOR_EFFECT_VARIANCE) -> Interval:
    """The anytime-valid interval on the mean of `differences` (one per fold) at level 1 - alpha."""
    count = len(differences)
    mean = math.fsum(differences) / count if count else 0.0
    t_bound = critical_t(count, alpha, prior_variance)
    squares = math.fsum((d - mean) ** 2 for d in differences)
    spread = math.sqrt(squares / (count - 1)) if count > 1 else math.nan
    if math.isinf(t_bound):
        return Interval(count, mean, -math.inf, math.inf, spread)
    half = t_bound * spread / math.sqrt(count)
    return Interval(count, mean, mean - half, mean + half, spread)


def verdict_of(bounds: Interval, rope: float) -> Verdict:
    """Inside the rope: equivalent (a real but negligible difference counts as none); else by sign."""
    if -rope <= bounds.low and bounds.high <= rope:
        return "equivalent"
    if bounds.low > 0:
        return "better"
    if bounds.high < 0:
        return "worse"
    return "open"


def paired_differences(first: FoldScores, second: FoldScores) -> list[float]:
    """first - second on the folds both have, in fold order (a failed fold pairs with nothing)."""
    return [first[fold] - second[fold] for fold in sorted(set(first) & set(second))]


def compare(dataset: str, first: str, second: str, scores: Mapping[str, FoldScores], alpha: float,
            rope: float = 0.0) -> PairOutcome:
    bounds = interval(paired_differences(scores[first], scores[second]), alpha)
    return PairOutcome(dataset, first, second, verdict_of(bounds, rope), bounds, alpha)


def pairwise(dataset: str, scores: Mapping[str, FoldScores], confidence: float,
             rope: float = 0.0) -> list[PairOutcome]:
    """Every pair of frameworks on one dataset, each at `confidence`."""
    return [compare(dataset, first, second, scores, 1.0 - confidence, rope)
            for first, second in combinations(sorted(scores), 2)]


def race(dataset: str, scores: Mapping[str, FoldScores], confidence: float, rope: float = 0.0) -> RaceOutcome:
    """The best framework on one dataset at `confidence` for the race as a whole (Bonferroni)."""
    names = sorted(scores)
    pair_count = max(1, len(names) * (len(names) - 1) // 2)
    alpha = (1.0 - confidence) / pair_count
    pairs = tuple(compare(dataset, first, second, scores, alpha, rope)
                  for first, second in combinations(names, 2))
    beaten = {pair.second for pair in pairs if pair.verdict == "better"}
    beaten |= {pair.first for pair in pairs if pair.verdict == "worse"}
    remaining = tuple(name for name in names if name not in beaten)
    settled = all(pair.settled for pair in pairs
                  if pair.first in remaining and pair.second in remaining)
    winner = remaining[0] if settled and len(remaining) == 1 else None
    return RaceOutcome(dataset, remaining, winner, settled, pairs)


def best_across(races: Sequence[RaceOutcome]) -> BestAcross:
    """The framework with the most settled dataset wins; settled once no other framework, winning
    every open race it is still in, could reach its wins (a settled tie counts as a win for no one).
    It is wrong only if some dataset's race is."""
    wins: dict[str, int] = {}
    racing: dict[str, int] = {}  # open races each framework is still in
    for outcome in races:
        for name in outcome.remaining:
            wins.setdefault(name, 0)
            if not outcome.settled:
                racing[name] = racing.get(name, 0) + 1
        if outcome.winner is not None:
            wins[outcome.winner] += 1
    open_datasets = tuple(outcome.dataset for outcome in races if not outcome.settled)
    ranked = sorted(wins.items(), key=lambda item: (-item[1], item[0]))
    if not ranked:
        return BestAcross(None, wins, open_datasets, not open_datasets)
    leader, top = ranked[0]
    contenders = frozenset(name for name, count in wins.items() if count + racing.get(name, 0) >= top)
    settled = contenders == {leader}
    return BestAcross(leader if settled else None, wins, open_datasets, settled, contenders)


@dataclass(frozen=True)
class TopK:
    """The k frameworks of best expected fold mean rank, over the folds every cell has run."""

    k: int
    folds: int
    mean_rank: dict[str, float]  # the fold mean rank averaged over those folds (1 is best)
    top: tuple[str, ...]  # settled in the top k
    out: tuple[str, ...]  # settled out of it
    settled: bool
    # Per pair, the sequence on second's fold mean rank minus first's: `better` is first ranking better.
    pairs: tuple[PairOutcome, ...]

    @property
    def undecided(self) -> tuple[str, ...]:
        return tuple(name for name in self.mean_rank if name not in self.top and name not in self.out)


def pooled_folds(scores: Mapping[str, Mapping[str, FoldScores]]) -> int:
    """How many folds the top k pools: the first n, n the fewest folds any cell has reached (a cell
    without any result, every job failed, limits nothing). Below n a missing result is a failed job."""
    reached = [max(by_fold) + 1 for by_framework in scores.values() for by_fold in by_framework.values()
               if by_fold]
    return min(reached, default=0)


def _points(first: float | None, second: float | None, rope: float) -> float:
    """first's share of a fold against second: 1 better (beyond the rope), 0.5 equal, 0 worse; a
    failed fold (None) loses to any result."""
    if first is None or second is None:
        return 0.5 if first is None and second is None else float(first is not None)
    if abs(first - second) <= rope:
        return 0.5
    return float(first > second)


def fold_mean_ranks(scores: Mapping[str, Mapping[str, FoldScores]], names: Sequence[str], fold: int,
                    rope: float = 0.0) -> dict[str, float]:
    """Each framework's rank on this fold (1 + better results + half the equal ones), averaged over
    the datasets."""
    totals = dict.fromkeys(names, 0.0)
    for by_framework in scores.values():
        results = {name: by_framework.get(name, {}).get(fold) for name in names}
        for name in names:
            totals[name] += 1.0 + sum(1.0 - _points(results[name], results[other], rope)
                                      for other in names if other != name)
    return {name: total / max(1, len(scores)) for name, total in totals.items()}


def top_k(scores: Mapping[str, Mapping[str, FoldScores]], k: int, confidence: float,
          rope: float = 0.0) -> TopK:
    """Which k frameworks rank best across datasets, at `confidence` for the decision as a whole."""
    names = sorted({name for by_framework in scores.values() for name in by_framework})
    folds = pooled_folds(scores)
    per_fold = [fold_mean_ranks(scores, names, fold, rope) for fold in range(folds)]
    mean_rank = {name: math.fsum(ranks[name] for ranks in per_fold) / folds if folds else math.nan
                 for name in names}
    alpha = (1.0 - confidence) / max(1, len(names) * (len(names) - 1) // 2)
    pairs = []
    for first, second in combinations(names, 2):
        bounds = interval([ranks[second] - ranks[first] for ranks in per_fold], alpha)
        pairs.append(PairOutcome(ACROSS, first, second, verdict_of(bounds, 0.0), bounds, alpha))
    below = dict.fromkeys(names, 0)  # how many frameworks each is settled better than
    above = dict.fromkeys(names, 0)  # how many are settled better than it
    for pair in pairs:
        if pair.verdict in ("better", "worse"):
            ahead = pair.verdict == "better"
            below[pair.first if ahead else pair.second] += 1
            above[pair.second if ahead else pair.first] += 1
    top = tuple(name for name in names if below[name] >= len(names) - k)
    out = tuple(name for name in names if above[name] >= k)
    return TopK(k, folds, mean_rank, top, out, len(top) + len(out) == len(names), tuple(pairs))


def _top_k_wants_folds(outcome: TopK, max_folds: int | None) -> bool:
    """Open, and (with `max_folds`, futility) some open pair of an undecided framework could settle."""
    if outcome.settled:
        return False
    undecided = set(outcome.undecided)
    return any(not pair.settled and {pair.first, pair.second} & undecided and pair.could_settle_by(max_folds)
               for pair in outcome.pairs)


def needs_more_folds(scores: Mapping[str, Mapping[str, FoldScores]], confidence: float,
                     decide: Sequence[str], rope: float = 0.0,
                     max_folds: int | None = None, k: int | None = None) -> set[Cell]:
    """The (dataset, framework) cells that an open decision still needs: both frameworks of an open
    pair (pairwise), or of an open pair within an open race while the best across datasets is open,
    one of them still in contention for it (best), or every cell while the top `k` is open (top_k);
    with `max_folds`, only pairs that folds up to it could still settle. Each cell is decided on its
    own: a framework whose every comparison on a dataset is settled stops there while it runs on others."""
    wanted: set[Cell] = set()
    if "top_k" in decide and k is not None and _top_k_wants_folds(top_k(scores, k, confidence, rope),
                                                                    max_folds):
        wanted |= {(dataset, name) for dataset, by_framework in scores.items() for name in by_framework}
    races = [race(dataset, by_framework, confidence, rope) for dataset, by_framework in scores.items()]
    if "pairwise" in decide:
        for dataset, by_framework in scores.items():
            for pair in pairwise(dataset, by_framework, confidence, rope):
                if not pair.settled and pair.could_settle_by(max_folds, rope):
                    wanted |= {(dataset, pair.first), (dataset, pair.second)}
    best = best_across(races)
    if "best" in decide and not best.settled:
        for outcome in races:
            for pair in outcome.pairs:
                # A pair of two frameworks out of contention cannot change the leader: no folds for it.
                if ({pair.first, pair.second} <= set(outcome.remaining) and not pair.settled
                        and {pair.first, pair.second} & best.contenders
                        and pair.could_settle_by(max_folds, rope)):
                    wanted |= {(outcome.dataset, pair.first), (outcome.dataset, pair.second)}
    return wanted


# ---------------------------------------------------------------- rounds (a run does these; a replay too)

Grid = Mapping[str, Mapping[str, FoldScores]]  # dataset -> framework -> fold -> result


@dataclass(frozen=True)
class Rounds:
    """What the rounds gave each cell, and the decisions at the end.

    `folds[(dataset, framework)]` is how many folds the cell got; `settled_at[...]` the round (1 is
    the first, `min_folds` folds) after which no open decision needed it, None if it ran to the last.
    """

    folds: dict[Cell, int]
    settled_at: dict[Cell, int | None]
    pairs: list[PairOutcome]
    races: list[RaceOutcome]
    best: BestAcross
    rounds: int
    top: TopK | None = None  # with `k`: the top k across datasets

    @property
    def jobs(self) -> int:
        return sum(self.folds.values())


def visible(grid: Grid, folds: Mapping[Cell, int]) -> dict[str, dict[str, dict[int, float]]]:
    """The grid as the rounds have seen it: each cell's results on its first `folds` folds."""
    return {dataset: {name: {fold: score for fold, score in by_fold.items()
                             if fold < folds.get((dataset, name), 0)}
                      for name, by_fold in by_framework.items()}
            for dataset, by_framework in grid.items()}


def play_rounds(grid: Grid, *, confidence: float, min_folds: int, max_folds: int,
                decide: Sequence[str], rope: float = 0.0, futility: bool = False,
                reopened: Collection[Cell] = (), k: int | None = None) -> Rounds:
    """Replay the rounds a run makes on a grid already run: every cell gets `min_folds` folds, then
    one more fold per round while an open decision needs it (and, with `futility`, could still be
    settled by `max_folds`), up to `max_folds`. `reopened` cells (a regression since the previous
    execution) get every round's fold, up to `max_folds`, whatever the decisions say. `k` is the top
    k's (decide `top_k`)."""
    cells = [(dataset, name) for dataset, by_framework in grid.items() for name in by_framework]
    folds = dict.fromkeys(cells, min_folds)
    settled_at: dict[Cell, int | None] = dict.fromkeys(cells)
    round_number = 1
    while True:
        wanted = needs_more_folds(visible(grid, folds), confidence, decide, rope,
                                  max_folds if futility else None, k) | set(reopened)
        for cell in cells:
            if cell in wanted:
                settled_at[cell] = None  # (re)opened: a later round settles it, or none does
            elif settled_at[cell] is None:
                settled_at[cell] = round_number
        if not wanted or min_folds + round_number - 1 >= max_folds:
            break
        round_number += 1
        for cell in wanted:
            folds[cell] = min_folds + round_number - 1
    seen = visible(grid, folds)
    pairs = [pair for dataset, by_framework in seen.items()
             for pair in pairwise(dataset, by_framework, confidence, rope)]
    races = [race(dataset, by_framework, confidence, rope) for dataset, by_framework in seen.items()]
    top = top_k(seen, k, confidence, rope) if "top_k" in decide and k is not None else None
    return Rounds(folds, settled_at, pairs, races, best_across(races), round_number, top)
