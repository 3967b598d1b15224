"""What explains a change in `compare`: the factors that differ between the two sides (named with
their values), a Shapley split of the change over them where other runs cover every mix, and the
DTW alignment of the runs' series that says where in the job they part."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pandas as pd

from tasks.report import series as job_series
from tasks.resources import SERIES_FILE
from tasks.results import TRAINING_CURVE_FILE

# Series of one run: artifact name -> frame (tasks.tracking.read.job_series gives them by run id).
RunSeries = Mapping[str, Mapping[str, pd.DataFrame]]
# Series aligned per cell: (artifact, columns aligned together; the first is the one described).
ALIGNED_SERIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (SERIES_FILE, ("rss_mb", "cpu_pct", "gpu_util_pct")),
    (TRAINING_CURVE_FILE, ("validation_loss",)),
)
MAX_PAIRS = 6  # run pairs aligned per cell (DTW is the slow part)
UNSET = "unset"


@dataclass(frozen=True)
class Factor:
    """What may explain a change: tag/param columns that together make one setting."""

    name: str
    columns: tuple[str, ...] = ()
    prefix: str = ""  # plus every column starting with it (framework params)

    def columns_in(self, frame: pd.DataFrame) -> list[str]:
        found = [c for c in self.columns if c in frame]
        if self.prefix:
            found += sorted(c for c in frame if c.startswith(self.prefix))
        return found


# Named factors; every other tag or param in the runs is a factor of its own, under its name.
FACTORS: tuple[Factor, ...] = (
    Factor("framework_version", ("framework_version",)),
    Factor("data_version", ("data_version",)),
    Factor(
        "budget",
        ("budget", "params.budget_time_s", "params.budget_cores", "params.budget_memory_mb",
         "params.budget_gpus"),
    ),
    Factor("hardware", ("host", "cpu_model", "gpu_model")),
    Factor("code", ("git_sha", "app_version")),
    Factor("params", prefix="params.param."),
)
# Factors of a cell as a whole rather than of each run (no Shapley split over them).
CELL_FACTORS = ("folds", "seeds", "recorded metrics")
# What identifies a job or its outcome, not how it ran: never a factor.
NOT_FACTORS = frozenset(
    {
        "suite", "execution_id", "job_key", "status", "error", "framework", "framework_name", "dataset",
        "fold", "seed", "params.fold", "params.seed", "problem_type", "run_id", "parent_run_id",
        "experiment_id", "start_time", "end_time", "run_status", "regression", "regression_baseline",
        "_side",
    }
)
# Outcomes recorded as tags (a post-job evaluation's status and reason) and MLflow's own tags.
NOT_FACTOR_PREFIXES = ("mlflow.", "evaluation.")


# ---------------------------------------------------------------- factors


def _blank(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def factor_columns(frame: pd.DataFrame, figures: set[str]) -> dict[str, list[str]]:
    """Factor name -> its columns in this frame: the named FACTORS, then every other tag or param
    (neither one of the compared `figures` nor numeric: a figure is an outcome, not a setting)."""
    factors = {f.name: f.columns_in(frame) for f in FACTORS}
    claimed = {c for cols in factors.values() for c in cols}
    for column in frame.columns:
        if column in claimed or column in NOT_FACTORS or column.startswith(NOT_FACTOR_PREFIXES):
            continue
        if column in figures or pd.api.types.is_numeric_dtype(frame[column]):
            continue
        factors[column.removeprefix("params.")] = [column]
    return {name: cols for name, cols in factors.items() if cols}


def signature(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One hashable value per run for a factor (its columns joined; a missing value is blank)."""
    return frame[columns].apply(lambda row: "|".join(_blank(v) for v in row), axis=1)


def mode(values: pd.Series) -> str:
    return str(values.mode().iloc[0]) if len(values) else ""


def setting(runs: pd.DataFrame, columns: list[str]) -> dict[str, str]:
    """The cell's value of each column on one side (the most common one), blank when unset."""
    return {c: mode(runs[c].map(_blank)) for c in columns}


def _short(column: str) -> str:
    return column.removeprefix("params.param.").removeprefix("params.")


def describe_factor(name: str, base: dict[str, str], cand: dict[str, str]) -> str:
    """'params: max_iter unset -> 3' (each column that differs, with its two values)."""
    changes = [
        f"{_short(c)} {base.get(c) or UNSET} -> {cand.get(c) or UNSET}"
        for c in dict.fromkeys([*base, *cand])
        if (base.get(c) or "") != (cand.get(c) or "")
    ]
    if len(changes) == 1 and changes[0].startswith(f"{name} "):
        return changes[0].replace(f"{name} ", f"{name}: ", 1)
    return f"{name}: " + ", ".join(changes)


def cell_settings(runs: pd.DataFrame, recorded: list[str]) -> dict[str, dict[str, str]]:
    """The cell-level factors of one side: which folds, how many seeds, which figures recorded."""
    ok = runs[runs["ok"]]
    return {
        "folds": {"folds": ",".join(str(f) for f in sorted(runs["fold"].unique()))},
        "seeds": {"seeds": str(runs.groupby("fold")["seed"].nunique().max()) if len(runs) else "0"},
        "recorded metrics": {name: "recorded" if ok[name].notna().any() else "" for name in recorded},
    }


# ---------------------------------------------------------------- the split


def attribute(
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
    not_separable = " + ".join(factors) + " (not separable: no runs vary them one at a time)"
    if any(f not in signatures for f in factors):
        return not_separable
    means: dict[frozenset[str], float] = {frozenset(): base_mean, frozenset(factors): cand_mean}
    for size in range(1, len(factors)):
        for subset in itertools.combinations(factors, size):
            mask = pd.Series(True, index=pool.index)
            for factor in factors:
                wanted = cand_config[factor] if factor in subset else base_config[factor]
                mask &= signatures[factor] == wanted
            hits = pool.loc[mask, quantity].dropna() if quantity in pool else pd.Series(dtype=float)
            if hits.empty:
                return not_separable
            means[frozenset(subset)] = float(hits.mean())
    split = shapley(factors, lambda s: means[frozenset(s)])
    main = max(split, key=lambda f: abs(split[f]))
    change = cand_mean - base_mean
    share = abs(split[main]) / sum(abs(v) for v in split.values()) if any(split.values()) else 0.0
    detail = ", ".join(f"{f} {v:+.4g}" for f, v in sorted(split.items(), key=lambda kv: -abs(kv[1])))
    return f"{main} ({share:.0%} of {change:+.4g}; Shapley: {detail})"


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


# ---------------------------------------------------------------- where in the job


def align_cell(b_ok: pd.DataFrame, c_ok: pd.DataFrame, run_series: RunSeries) -> list[job_series.Alignment]:
    """Per aligned series, the alignment of the run pair (same fold) with the median DTW distance."""
    if not run_series or "run_id" not in b_ok:
        return []
    pairs = []
    for fold in sorted(set(b_ok["fold"]) & set(c_ok["fold"])):
        base_ids = b_ok[b_ok["fold"] == fold].sort_values("seed")["run_id"].tolist()
        cand_ids = c_ok[c_ok["fold"] == fold].sort_values("seed")["run_id"].tolist()
        pairs += list(zip(base_ids, cand_ids, strict=False))
    chosen = []
    for artifact, columns in ALIGNED_SERIES:
        found = []
        for base_id, cand_id in pairs[:MAX_PAIRS]:
            base_frame = run_series.get(base_id, {}).get(artifact)
            cand_frame = run_series.get(cand_id, {}).get(artifact)
            if base_frame is None or cand_frame is None:
                continue
            alignment = job_series.align(base_frame, cand_frame, columns)
            if alignment is not None:
                found.append(alignment)
        if found:
            found.sort(key=lambda a: a.distance)
            chosen.append(found[(len(found) - 1) // 2])
    return chosen
