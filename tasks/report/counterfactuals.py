"""Counterfactual attribution of a regression: which factor, measured, explains how much of it.

`automl-eval explain-regression` (flows/explain_regression.py) runs the regressed cells once per
mix of the differing factors (each factor at its baseline or its candidate value). This module is
the arithmetic on what those runs recorded, with no MLflow and no jobs:

- the mixes to run: all 2^k for k factors (k <= max_factors), else one factor at a time;
- per unit (dataset, framework, fold, seed) present in every mix, the exact Shapley value of each
  factor in the change of each quantity; a Shapley value is linear in the game, so the mean over
  the units is the Shapley value of the mean change, and the units' spread gives a t-interval;
- the check that the shares add up to the change the mixes measured (efficiency, within 1e-9);
- the sentence and the table a person reads;
- the bisection over the releases between two framework versions (which release brought it).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from scipy import stats

from tasks.evaluations.vocabulary import attributed_figures
from tasks.report.compare_attribution import shapley
from tasks.vocabulary import RESULT

# What is attributed: the score and the job's costs (fit time, peak RSS, p99 latency), then the
# post-job evaluations' figures declared `attributed` (served p99 and QPS), each where the runs
# record it.
JOB_ATTRIBUTED: tuple[str, ...] = (RESULT, "fit_s", "peak_rss_mb", "latency_p99_ms")


def attributed() -> tuple[str, ...]:
    return JOB_ATTRIBUTED + attributed_figures()

UNIT = ("dataset", "framework", "fold", "seed")  # one job's place, the same in every mix
CONFIDENCE = 0.95
EXACT_TOLERANCE = 1e-9
ALL_MIXES = "all mixes"
ONE_AT_A_TIME = "one at a time"

Mix = frozenset[str]  # the factors at their candidate value; the others at the baseline's


def mix_label(mix: Mix, factors: Sequence[str]) -> str:
    """'baseline', 'candidate', or the factors switched to the candidate ('+data_version')."""
    if not mix:
        return "baseline"
    if set(mix) == set(factors):
        return "candidate"
    return " ".join(f"+{f}" for f in factors if f in mix)


def plan_mixes(factors: Sequence[str], max_factors: int) -> tuple[list[Mix], str]:
    """Every mix (2^k) when k <= max_factors, else the two ends and each factor alone (k + 2)."""
    if len(factors) <= max_factors:
        mixes = [
            frozenset(c) for size in range(len(factors) + 1) for c in itertools.combinations(factors, size)
        ]
        return mixes, ALL_MIXES
    return [frozenset(), *(frozenset({f}) for f in factors), frozenset(factors)], ONE_AT_A_TIME


def unit_values(runs: pd.DataFrame, quantity: str) -> pd.Series:
    """A mix's value of `quantity` per unit (ok jobs only; a framework named by family, no @version)."""
    if quantity not in runs or runs.empty:
        return pd.Series(dtype=float)
    ok = runs[runs["status"] == "ok"].copy()
    ok["framework"] = ok["framework"].astype(str).str.partition("@")[0]
    ok["fold"] = pd.to_numeric(ok["fold"]).astype(int)
    ok["seed"] = pd.to_numeric(ok["seed"]).astype(int)
    values = pd.to_numeric(ok[quantity], errors="coerce")
    return values.groupby([ok[c] for c in UNIT]).mean().dropna()


@dataclass(frozen=True)
class Share:
    factor: str
    quantity: str
    value: float  # mean over units of the factor's Shapley value (or its one-at-a-time effect)
    ci_low: float
    ci_high: float
    fraction: float  # |value| / sum of |values| of this quantity
    units: int


@dataclass
class Attribution:
    factors: list[str]
    method: str  # ALL_MIXES or ONE_AT_A_TIME
    shares: list[Share] = field(default_factory=list)
    # quantity -> (measured change: candidate mix - baseline mix, sum of the shares)
    totals: dict[str, tuple[float, float]] = field(default_factory=dict)
    means: dict[str, dict[str, float]] = field(default_factory=dict)  # quantity -> mix label -> mean

    def table(self) -> pd.DataFrame:
        columns = ["quantity", "factor", "share", "ci_low", "ci_high", "fraction", "units"]
        rows = [
            [s.quantity, s.factor, s.value, s.ci_low, s.ci_high, s.fraction, s.units] for s in self.shares
        ]
        return pd.DataFrame(rows, columns=columns)

    def exact(self, quantity: str) -> bool:
        """Efficiency: the shares add up to the measured change (only for the full Shapley split)."""
        change, total = self.totals.get(quantity, (math.nan, math.nan))
        return self.method == ALL_MIXES and abs(change - total) <= EXACT_TOLERANCE * max(1.0, abs(change))

    def main(self, quantity: str = RESULT) -> Share | None:
        found = [s for s in self.shares if s.quantity == quantity]
        return max(found, key=lambda s: abs(s.value)) if found else None

    def sentence(self, quantity: str = RESULT, described: Mapping[str, str] | None = None) -> str:
        """'result change -0.36: data_version (a -> b) explains 0.97 (-0.349, 95% CI ..); params ...'."""
        found = sorted((s for s in self.shares if s.quantity == quantity), key=lambda s: -abs(s.value))
        if not found:
            return f"no unit recorded {quantity} in every mix"
        change = self.totals[quantity][0]
        described = described or {}
        parts = []
        for share in found:
            name = described.get(share.factor, share.factor)
            interval = (
                ""
                if math.isnan(share.ci_low)
                else f", {CONFIDENCE:.0%} CI {share.ci_low:+.4g}..{share.ci_high:+.4g}"
            )
            parts.append(f"{name} explains {share.fraction:.2f} ({share.value:+.4g}{interval})")
        how = "" if self.method == ALL_MIXES else " (one factor at a time: not a Shapley split)"
        return f"{quantity} change {change:+.4g}: " + "; ".join(parts) + how


def _interval(values: np.ndarray) -> tuple[float, float, float]:
    mean = float(values.mean())
    if len(values) < 2:
        return mean, math.nan, math.nan
    half = float(
        stats.t.ppf(0.5 + CONFIDENCE / 2, len(values) - 1) * values.std(ddof=1) / math.sqrt(len(values))
    )
    return mean, mean - half, mean + half


def attribute(
    factors: Sequence[str],
    method: str,
    mix_runs: Mapping[Mix, pd.DataFrame],
    quantities: Iterable[str] | None = None,
) -> Attribution:
    """Each factor's share of each quantity's change (by default every attributed figure), from the
    job runs of every mix."""
    factors = list(factors)
    quantities = attributed() if quantities is None else quantities
    result = Attribution(factors, method)
    for quantity in quantities:
        per_mix = {mix: unit_values(runs, quantity) for mix, runs in mix_runs.items()}
        if any(values.empty for values in per_mix.values()):
            continue
        units = sorted(set.intersection(*(set(v.index) for v in per_mix.values())))
        if not units:
            continue
        table = pd.DataFrame({mix: values.reindex(units) for mix, values in per_mix.items()})
        if method == ALL_MIXES:
            per_unit: dict[str, list[float]] = {f: [] for f in factors}
            for unit in units:
                for factor, value in shapley(factors, _mix_values(table.loc[unit])).items():
                    per_unit[factor].append(value)
        else:
            base = table[frozenset()].to_numpy()
            per_unit = {f: list(table[frozenset({f})].to_numpy() - base) for f in factors}
        values = {f: _interval(np.asarray(v, dtype=float)) for f, v in per_unit.items()}
        magnitude = sum(abs(v[0]) for v in values.values())
        for factor, (mean, low, high) in values.items():
            fraction = abs(mean) / magnitude if magnitude else 0.0
            result.shares.append(Share(factor, quantity, mean, low, high, fraction, len(units)))
        change = float((table[frozenset(factors)] - table[frozenset()]).mean())
        result.totals[quantity] = (change, sum(v[0] for v in values.values()))
        result.means[quantity] = {mix_label(m, factors): float(table[m].mean()) for m in table.columns}
    return result


# ---------------------------------------------------------------- bisection over releases


@dataclass(frozen=True)
class Step:
    release: str
    value: float  # the mean `result` at that release; NaN when it could not run
    verdict: str  # "old" (behaves like the old version), "new", or why it could not run


@dataclass
class Bisection:
    """Which release between two framework versions brought the change (on `result`)."""

    framework: str
    old: str
    new: str
    releases: list[str]  # strictly between old and new, oldest first
    with_old: float  # the mix with the old version (the other factors held)
    with_new: float
    steps: list[Step] = field(default_factory=list)
    last_old: str = ""  # the newest release seen to behave like the old version
    first_new: str = ""  # the oldest release seen to behave like the new one
    untried: list[str] = field(default_factory=list)  # still between the two, never measured
    stopped: str = ""  # why it ended before one release was named

    def sentence(self) -> str:
        head = f"{self.framework} {self.old} -> {self.new}"
        if not self.untried and not self.stopped:
            return (f"{head}: the change came with {self.framework} {self.first_new} "
                    f"(last release like {self.old}: {self.last_old}; {len(self.steps)} releases run)")
        left = ", ".join(self.untried)
        return (f"{head}: the change came between {self.last_old} and {self.first_new}; not tried: "
                f"{left or 'none'} ({self.stopped})")


def bisect_releases(
    framework: str,
    old: str,
    new: str,
    releases: Sequence[str],
    with_old: float,
    with_new: float,
    measure: Callable[[str], float | str],
    max_steps: int,
) -> Bisection:
    """Binary search for the first release that behaves like `new`: each tried release is `old` or
    `new` by which end its measured value is nearer. `measure(release)` runs it (a value) or says
    why it could not (a string): the search then stops with the releases left untried, as it does
    when `max_steps` (the job cap) is spent."""
    result = Bisection(framework, old, new, list(releases), with_old, with_new)
    low, high = -1, len(releases)  # releases[low] behaves like old (-1: old itself), [high] like new
    while high - low > 1:
        if len(result.steps) >= max_steps:
            result.stopped = f"the job cap allowed {max_steps} releases"
            break
        middle = (low + high) // 2
        release = releases[middle]
        measured = measure(release)
        if isinstance(measured, str):
            result.steps.append(Step(release, math.nan, measured))
            result.stopped = f"{release} could not run: {measured}"
            break
        like_new = abs(measured - with_new) < abs(measured - with_old)
        result.steps.append(Step(release, measured, "new" if like_new else "old"))
        if like_new:
            high = middle
        else:
            low = middle
    result.last_old = releases[low] if low >= 0 else old
    result.first_new = releases[high] if high < len(releases) else new
    # Never measured: low and high move only on a release that ran (one that could not is here too).
    result.untried = list(releases[low + 1 : high])
    return result


def _mix_values(row: pd.Series) -> Callable[[frozenset[str]], float]:
    """The outcome of each mix (a set of factors switched to the candidate) of one unit's row."""
    return lambda mix: float(row[frozenset(mix)])
