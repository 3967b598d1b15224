"""Compare two suite executions and diagnose what regressed, and why.

Per (dataset, framework) and per quantity (result, fit time, p99 latency, peak RSS): the change of
the mean, and a z-score of that change against the baseline's own spread over folds and seeds. A
change is a regression only when it goes the wrong way, exceeds a relative threshold AND stands
out of the noise (|z| >= z threshold). Factors that differ between the two sides (framework
version, data version, budget, hardware, code, params) are named; where other runs cover every
one-factor-at-a-time mix of the two sides, the change is split over the factors by Shapley values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from tasks.report import jobs as job_table
from tasks.vocabulary import RESULT

# quantity -> True when higher is better
QUANTITIES: dict[str, bool] = {RESULT: True, "fit_s": False, "latency_p99_ms": False, "peak_rss_mb": False,
                               # robustness (a regression: AUC down, breaking point lower); runs without the
                               # robustness evaluation lack them and are not compared on them
                               "robust_auc": True, "robust_breaking_mean": True,
                               # serving (tasks/evaluations/serving.py): cost figures, compared when recorded
                               "serve_p99_ms": False, "serve_max_qps_at_slo": True}
# Quantities held to the result threshold rather than the (noisier) cost threshold.
SCORE_QUANTITIES = frozenset({RESULT, "robust_auc", "robust_breaking_mean"})
DEFAULT_RESULT_THRESHOLD = 0.02  # 2% of the baseline's |result|: AUC 0.85 -> 0.017
DEFAULT_COST_THRESHOLD = 0.25  # costs are noisier: 25% slower or bigger
DEFAULT_Z_THRESHOLD = 3.0
# Columns that make each factor; `params.param.*` (framework params) are added per comparison.
FACTOR_COLUMNS: dict[str, tuple[str, ...]] = {
    "framework_version": ("framework_version",),
    "data_version": ("data_version",),
    "budget": (
        "budget",
        "params.budget_time_s",
        "params.budget_cores",
        "params.budget_memory_mb",
        "params.budget_gpus",
    ),
    "hardware": ("host", "cpu_model", "gpu_model"),
    "git_sha": ("git_sha",),
    "params": (),
}
TABLE_COLUMNS = [
    "dataset",
    "framework",
    "metric",
    "current",
    "baseline",
    "change",
    "change_pct",
    "z",
    "regression",
    "main factor",
    "differing factors",
]


@dataclass(frozen=True)
class Thresholds:
    result: float = DEFAULT_RESULT_THRESHOLD
    cost: float = DEFAULT_COST_THRESHOLD
    z: float = DEFAULT_Z_THRESHOLD


@dataclass
class Comparison:
    table: pd.DataFrame  # TABLE_COLUMNS, one row per (dataset, framework, metric)
    thresholds: Thresholds = field(default_factory=Thresholds)
    unmatched: list[str] = field(default_factory=list)  # "dataset / framework (only in ...)"

    @property
    def regressions(self) -> pd.DataFrame:
        return self.table[self.table["regression"]]

    @property
    def regressed(self) -> bool:
        return bool(self.table["regression"].any())


def _factor_columns(frame: pd.DataFrame) -> dict[str, list[str]]:
    columns = {name: [c for c in cols if c in frame] for name, cols in FACTOR_COLUMNS.items()}
    columns["params"] = sorted(c for c in frame if c.startswith("params.param."))
    return {name: cols for name, cols in columns.items() if cols}


def _signature(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One hashable value per run for a factor (its columns joined)."""
    values = frame[columns].fillna("").astype(str)
    return values.apply(lambda row: "|".join(row), axis=1) if len(columns) > 1 else values[columns[0]]


def _mode(values: pd.Series) -> str:
    return str(values.mode().iloc[0]) if len(values) else ""


def noise_std(values: pd.DataFrame, column: str) -> float:
    """The baseline's run-to-run spread: pooled std between seeds within folds, else std over folds."""
    within = values.groupby("fold")[column].agg(["var", "count"]).dropna()
    within = within[within["count"] >= 2]
    if len(within):
        return float(math.sqrt((within["var"] * (within["count"] - 1)).sum() / (within["count"] - 1).sum()))
    return float(values[column].std()) if values[column].notna().sum() >= 2 else float("nan")


def shapley(factors: list[str], value: Callable[[frozenset[str]], float]) -> dict[str, float]:
    """Exact Shapley values of a game over `factors` (value(S) = outcome with S switched to the candidate)."""
    m = len(factors)
    result = {}
    for factor in factors:
        others = [f for f in factors if f != factor]
        total = 0.0
        for size in range(m):
            weight = math.factorial(size) * math.factorial(m - size - 1) / math.factorial(m)
            for subset in itertools.combinations(others, size):
                chosen = frozenset(subset)
                total += weight * (value(chosen | {factor}) - value(chosen))
        result[factor] = total
    return result


def _attribute(
    factors: list[str],
    base_config: dict[str, str],
    cand_config: dict[str, str],
    pool: pd.DataFrame,
    signatures: dict[str, pd.Series],
    quantity: str,
    base_mean: float,
    cand_mean: float,
) -> str:
    """Name the factor behind a change: a Shapley split when the pool covers every mix, else the list."""
    if not factors:
        return "none differ (noise)"
    if len(factors) == 1:
        return factors[0]
    means: dict[frozenset[str], float] = {frozenset(): base_mean, frozenset(factors): cand_mean}
    for size in range(1, len(factors)):
        for subset in itertools.combinations(factors, size):
            mask = pd.Series(True, index=pool.index)
            for factor in factors:
                wanted = cand_config[factor] if factor in subset else base_config[factor]
                mask &= signatures[factor] == wanted
            hits = pool.loc[mask, quantity].dropna()
            if hits.empty:
                return " + ".join(factors) + " (not separable: no runs vary them one at a time)"
            means[frozenset(subset)] = float(hits.mean())
    split = shapley(factors, lambda s: means[frozenset(s)])
    main = max(split, key=lambda f: abs(split[f]))
    change = cand_mean - base_mean
    share = abs(split[main]) / sum(abs(v) for v in split.values()) if any(split.values()) else 0.0
    detail = ", ".join(f"{f} {v:+.4g}" for f, v in sorted(split.items(), key=lambda kv: -abs(kv[1])))
    return f"{main} ({share:.0%} of {change:+.4g}; Shapley: {detail})"


def compare(
    base_runs: pd.DataFrame,
    cand_runs: pd.DataFrame,
    *,
    pool: pd.DataFrame | None = None,
    thresholds: Thresholds | None = None,
    quantities: Iterable[str] = tuple(QUANTITIES),
) -> Comparison:
    """Diagnose the candidate execution against the baseline; `pool` adds runs for the Shapley split."""
    thresholds = thresholds or Thresholds()
    base, cand = job_table.prepare(base_runs), job_table.prepare(cand_runs)
    everything = job_table.prepare(
        pd.concat([base_runs, cand_runs] + ([pool] if pool is not None else []), ignore_index=True)
    )
    factor_columns = _factor_columns(everything)
    signatures = {name: _signature(everything, cols) for name, cols in factor_columns.items()}
    relative_noise = _relative_noise(base, quantities)
    rows = []
    base_cells = set(zip(base["dataset"], base["framework"], strict=True))
    cand_cells = set(zip(cand["dataset"], cand["framework"], strict=True))
    cells = sorted(base_cells & cand_cells)
    unmatched = [f"{d} / {f} (only in the baseline)" for d, f in sorted(base_cells - cand_cells)]
    unmatched += [f"{d} / {f} (only in the candidate)" for d, f in sorted(cand_cells - base_cells)]
    for dataset, framework in cells:
        in_base = (base["dataset"] == dataset) & (base["framework"] == framework)
        in_cand = (cand["dataset"] == dataset) & (cand["framework"] == framework)
        in_all = (everything["dataset"] == dataset) & (everything["framework"] == framework)
        b_all, c_all = base[in_base], cand[in_cand]
        b_ok, c_ok = b_all[b_all["ok"]], c_all[c_all["ok"]]
        base_config = {f: _mode(_signature(b_all, cols)) for f, cols in factor_columns.items()}
        cand_config = {f: _mode(_signature(c_all, cols)) for f, cols in factor_columns.items()}
        differing = [f for f in factor_columns if base_config[f] != cand_config[f]]
        for quantity in quantities:
            if quantity not in base or quantity not in cand:
                continue
            row = _quantity_row(quantity, b_ok, c_ok, thresholds, relative_noise.get(quantity, float("nan")))
            if row is None:
                continue
            if row["regression"] or abs(row["change"] if pd.notna(row["change"]) else 0) > 0:
                main = (
                    _attribute(
                        differing,
                        base_config,
                        cand_config,
                        everything[in_all],
                        {f: s[in_all] for f, s in signatures.items()},
                        quantity,
                        row["baseline"],
                        row["current"],
                    )
                    if pd.notna(row["current"])
                    else (" + ".join(differing) or "none differ") + " (candidate jobs failed)"
                )
            else:
                main = "no change"
            rows.append(
                {
                    "dataset": dataset,
                    "framework": framework,
                    **row,
                    "main factor": main,
                    "differing factors": ", ".join(
                        f"{f}: {base_config[f]} -> {cand_config[f]}" for f in differing
                    ),
                }
            )
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    return Comparison(table, thresholds, unmatched)


def _relative_noise(base: pd.DataFrame, quantities: Iterable[str]) -> dict[str, float]:
    """Median over cells of std / |mean|: the noise of a cell that has a single run."""
    ok = base[base["ok"]]
    noise = {}
    for quantity in quantities:
        if quantity not in ok:
            continue
        ratios = []
        for _, cell in ok.groupby(["dataset", "framework"]):
            std, mean = noise_std(cell, quantity), cell[quantity].mean()
            if np.isfinite(std) and mean:
                ratios.append(std / abs(mean))
        noise[quantity] = float(np.median(ratios)) if ratios else float("nan")
    return noise


def _quantity_row(
    quantity: str, b_ok: pd.DataFrame, c_ok: pd.DataFrame, thresholds: Thresholds, relative_noise: float
) -> dict[str, object] | None:
    base_values, cand_values = b_ok[quantity].dropna(), c_ok[quantity].dropna()
    if base_values.empty:
        return None
    baseline = float(base_values.mean())
    if cand_values.empty:  # every candidate job failed: the worst regression there is
        return {
            "metric": quantity,
            "current": float("nan"),
            "baseline": baseline,
            "change": float("nan"),
            "change_pct": float("nan"),
            "z": float("nan"),
            "regression": quantity == RESULT,
        }
    current = float(cand_values.mean())
    change = current - baseline
    std = noise_std(b_ok.dropna(subset=[quantity]), quantity)
    if not np.isfinite(std):
        std = relative_noise * abs(baseline)
    z = _z_score(change, std, len(base_values), len(cand_values))
    higher_is_better = QUANTITIES.get(quantity, True)
    worse = change < 0 if higher_is_better else change > 0
    relative = abs(change) / abs(baseline) if baseline else float("inf")
    threshold = thresholds.result if quantity in SCORE_QUANTITIES else thresholds.cost
    # Without any estimate of the noise (single runs everywhere), the threshold alone decides.
    beyond_noise = bool(np.isnan(z) or abs(z) >= thresholds.z)
    regression = bool(worse and relative >= threshold and beyond_noise)
    return {
        "metric": quantity,
        "current": current,
        "baseline": baseline,
        "change": change,
        "change_pct": 100 * change / abs(baseline) if baseline else float("nan"),
        "z": z,
        "regression": regression,
    }


def _z_score(change: float, std: float, base_count: int, cand_count: int) -> float:
    """Change over the standard error of a difference of two means; NaN when the noise is unknown."""
    if not np.isfinite(std):
        return float("nan")
    if change == 0:
        return 0.0
    standard_error = std * math.sqrt(1 / base_count + 1 / cand_count)
    return change / standard_error if standard_error > 0 else math.copysign(float("inf"), change)


# ---------------------------------------------------------------- rendering


def _fmt(value: object) -> str:
    if isinstance(value, float | np.floating):
        return "" if pd.isna(value) else f"{value:.4g}"
    return str(value)


def diagnostic_rows(comparison: Comparison, *, every_metric: bool = False) -> pd.DataFrame:
    """The seed's table: metric | current | baseline | change | main factor (dataset/framework in front).

    `result` is shown for every cell; costs only where they regressed or stand out of the noise,
    unless every_metric.
    """
    table = comparison.table
    if not every_metric:
        notable = table["regression"] | (table["z"].abs() >= comparison.thresholds.z)
        table = table[(table["metric"] == RESULT) | notable]
    out = pd.DataFrame(
        {
            "dataset / framework": table["dataset"] + " / " + table["framework"],
            "metric": table["metric"],
            "current": table["current"],
            "baseline": table["baseline"],
            "change": [
                f"{c:+.4g} ({p:+.1f}%)" if pd.notna(c) else "all jobs failed"
                for c, p in zip(table["change"], table["change_pct"], strict=True)
            ],
            "z": table["z"],
            "regression": table["regression"].map({True: "REGRESSION", False: ""}),
            "main factor": table["main factor"],
        }
    )
    return out.reset_index(drop=True)


def markdown(comparison: Comparison, base_label: str, cand_label: str) -> str:
    rows = diagnostic_rows(comparison)
    count = int(comparison.table["regression"].sum())
    thresholds = comparison.thresholds
    lines = [
        f"# Regression diagnosis: {cand_label} (current) vs {base_label} (baseline)",
        "",
        f"**{count} regression(s)**. A regression is a change the wrong way beyond "
        f"{thresholds.result:.0%} (result) or {thresholds.cost:.0%} (costs) AND |z| >= {thresholds.z:g} "
        "against the baseline's fold/seed spread.",
        "",
    ]
    if comparison.unmatched:
        lines += ["Not compared (run on one side only): " + ", ".join(comparison.unmatched) + ".", ""]
    if rows.empty:
        lines.append("Nothing in common to compare.")
    else:
        lines += ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
        lines += [
            "| " + " | ".join(_fmt(v).replace("|", "/") for v in row) + " |"
            for row in rows.itertuples(index=False)
        ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- executions in the store


def resolve_execution(reference: str, *, uri: str | None = None) -> str:
    """An execution id from an id, `SUITE@latest`, `SUITE@previous` or `SUITE@N` (N = 0 newest)."""
    from tasks.errors import UserError
    from tasks.tracking import read

    if "@" not in reference:
        read.execution(reference, uri=uri)  # raises a UserError for an unknown id
        return reference
    suite, _, which = reference.partition("@")
    offsets = {"latest": 0, "previous": 1}
    if which not in offsets and not which.isdigit():
        raise UserError(f"'{reference}': use an execution id, SUITE@latest, SUITE@previous or SUITE@N.")
    offset = offsets.get(which, int(which) if which.isdigit() else 0)
    found = read.executions(suite=suite, uri=uri)
    if len(found) <= offset:
        raise UserError(f"'{reference}': suite '{suite}' has {len(found)} execution(s) in the MLflow store.")
    return str(found["execution_id"].iloc[offset])


def previous_successful(
    execution_id: str, *, uri: str | None = None, same_tags: tuple[str, ...] = ("trigger", "team")
) -> str | None:
    """The newest earlier execution of the same suite that finished and was not itself a regression.

    Executions must also agree on `same_tags` (a nightly compares with nightlies of the same team).
    A regressed night is skipped so the alarm stays on until the change is fixed, not just once.
    """
    from tasks.tracking import read

    current = read.execution(execution_id, uri=uri)
    found = read.executions(suite=current.get("suite") or None, uri=uri)
    if found.empty:
        return None
    mask = (found["execution_id"] != execution_id) & (found["start_time"] < current["start_time"])
    mask &= found.get("execution_state", pd.Series("finished", index=found.index)).fillna("") == "finished"
    mask &= found["run_status"] == "FINISHED"
    if "regression" in found:
        mask &= found["regression"].fillna("") != "true"
    for tag in same_tags:
        column = found[tag].fillna("") if tag in found else pd.Series("", index=found.index)
        mask &= column == (current.get(tag) or "")
    earlier = found[mask]
    return str(earlier["execution_id"].iloc[0]) if len(earlier) else None


@dataclass
class NightlyComparison:
    execution_id: str
    baseline_id: str | None  # None: no earlier successful nightly to compare with
    comparison: Comparison | None
    markdown: str

    @property
    def regressed(self) -> bool:
        return bool(self.comparison is not None and self.comparison.regressed)


REGRESSION_TAG = "regression"
BASELINE_TAG = "regression_baseline"


def compare_with_previous_nightly(
    execution_id: str, *, uri: str | None = None, thresholds: Thresholds | None = None
) -> NightlyComparison:
    """Compare an execution with the previous successful one; tag it `regression=true|false`.

    The flow publishes `markdown` as an artifact and, when `regressed`, ends in a Failed state.
    """
    from tasks.tracking import read

    baseline_id = previous_successful(execution_id, uri=uri)
    if baseline_id is None:
        text = f"# Regression diagnosis\n\nNo earlier successful execution to compare {execution_id} with.\n"
        return NightlyComparison(execution_id, None, None, text)
    result = compare(
        read.job_runs(execution_id=baseline_id, uri=uri),
        read.job_runs(execution_id=execution_id, uri=uri),
        thresholds=thresholds,
    )
    read.set_tag(execution_id, REGRESSION_TAG, "true" if result.regressed else "false", uri=uri)
    read.set_tag(execution_id, BASELINE_TAG, baseline_id, uri=uri)
    text = markdown(result, baseline_id, execution_id)
    return NightlyComparison(execution_id, baseline_id, result, text)
