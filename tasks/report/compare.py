"""Compare two suite executions and diagnose what regressed, where in the job, and why.

Per (dataset, framework) and per quantity (QUANTITIES: result and cost figures; per-stage figures
from each job's resource samples): the change of the mean, and a z-score of that change against
the baseline's own spread over folds and seeds. A change is a regression only when it goes the
wrong way, exceeds a relative threshold AND stands out of the noise (|z| >= z threshold). Each
cell's resource series (and training curve, where the framework records one) are aligned with
DTW to say where the jobs part ("peak RSS +38% during fitting; fitting 1.6x longer"). Factors
that differ between the two sides (FACTORS, every other tag and param, fold and seed counts, the
metrics recorded) are named with their values, a factor on one side only included ("max_iter:
unset -> 3"); where other runs cover every one-factor-at-a-time mix of the two sides, the change
is split over the factors by Shapley values.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tasks import metric_registry
from tasks.errors import UserError
from tasks.report import jobs as job_table
from tasks.report import series as job_series
from tasks.resources import SERIES_FILE
from tasks.results import TRAINING_CURVE_FILE
from tasks.vocabulary import RESULT, STATUSES


@dataclass(frozen=True)
class Quantity:
    """One figure compared per cell: its direction and which threshold applies."""

    name: str
    threshold: str = "cost"  # "result" or "cost" (the Thresholds field)

    @property
    def higher_is_better(self) -> bool:  # the metric registry's direction (a stage figure: its figure's)
        return metric_registry.higher_is_better(self.name.rpartition(": ")[2])


# What `compare` compares. A new figure in the record (serving p99, robustness AUC) is one line here.
QUANTITIES: tuple[Quantity, ...] = (
    Quantity(RESULT, threshold="result"),
    Quantity("fit_s"),
    Quantity("duration_s"),
    Quantity("latency_p99_ms"),
    Quantity("peak_rss_mb"),
    Quantity("gpu_mem_peak_mb"),
    # robustness (a regression: AUC down, breaking point lower), held to the result threshold
    Quantity("robust_auc", threshold="result"),
    Quantity("robust_breaking_mean", threshold="result"),
    # serving (tasks/evaluations/serving.py): cost figures, compared when recorded
    Quantity("serve_p99_ms"),
    Quantity("serve_max_qps_at_slo"),
)
# Per-stage figures of each job's resource samples (tasks.report.series.stage_figures), compared as
# "STAGE: NAME" with the cost threshold; stages shorter than MIN_STAGE_S are a few samples long.
STAGE_QUANTITIES: tuple[str, ...] = ("duration_s", "peak_rss_mb")
MIN_STAGE_S = 1.0
# Series aligned per cell: (artifact, columns aligned together; the first is the one described).
ALIGNED_SERIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (SERIES_FILE, ("rss_mb", "cpu_pct", "gpu_util_pct")),
    (TRAINING_CURVE_FILE, ("validation_loss",)),
)
MAX_PAIRS = 6  # run pairs aligned per cell (DTW is the slow part)
DEFAULT_RESULT_THRESHOLD = 0.02  # 2% of the baseline's |result|: AUC 0.85 -> 0.017
DEFAULT_COST_THRESHOLD = 0.25  # costs are noisier: 25% slower or bigger
DEFAULT_Z_THRESHOLD = 3.0
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
    "where",
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
    unmatched: list[str] = field(default_factory=list)  # "dataset / framework: why not compared"
    # (dataset, framework) -> the cell's representative DTW alignments (resources, curve)
    alignments: dict[tuple[str, str], list[job_series.Alignment]] = field(default_factory=dict)

    @property
    def regressions(self) -> pd.DataFrame:
        return self.table[self.table["regression"]]

    @property
    def regressed(self) -> bool:
        return bool(self.table["regression"].any())


# Series of one run: artifact name -> frame (tasks.tracking.read.job_series gives them by run id).
RunSeries = Mapping[str, Mapping[str, pd.DataFrame]]


# ---------------------------------------------------------------- what the store holds


def _is_metric(frame: pd.DataFrame, column: str) -> bool:
    return column in {q.name for q in QUANTITIES} or pd.api.types.is_numeric_dtype(frame[column])


def check_runs(runs: pd.DataFrame, side: str) -> None:
    """Each job run names its dataset, framework, status, fold and seed, and holds numbers where
    figures belong; anything else is one sentence naming the run and the field."""
    if runs.empty:
        return
    numeric = [q.name for q in QUANTITIES if q.name in runs]
    for record in runs.to_dict("records"):
        run = record.get("run_id") or record.get("job_key") or "?"
        where = f"run {run} of the {side}"
        for tag in ("dataset", "framework", "status"):
            value = record.get(tag)
            if not isinstance(value, str) or not value.strip():
                raise UserError(f"{where} has no `{tag}` tag; it is not a job run of this project "
                                "(delete it in MLflow or give it the tag).")
        if record["status"] not in STATUSES:
            raise UserError(f"{where}: tag `status` is '{record['status']}', not one of "
                            f"{', '.join(STATUSES)}.")
        for key in ("fold", "seed"):
            value = record.get(key)
            value = record.get(f"params.{key}") if value is None or value == "" else value
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                try:
                    int(str(value))
                except ValueError:
                    raise UserError(f"{where}: `{key}` is '{value}', not a whole number.") from None
        for name in numeric:
            value = record.get(name)
            if value is not None and not isinstance(value, int | float):
                try:
                    float(value)
                except (TypeError, ValueError):
                    raise UserError(f"{where}: metric `{name}` is '{value}', not a number.") from None
        if record["status"] == "ok" and pd.isna(pd.to_numeric(record.get(RESULT), errors="coerce")):
            raise UserError(f"{where}: status is ok but it has no `{RESULT}` metric; "
                            "re-record the job (`automl-eval sync`) or delete the run.")
    if "job_key" in runs:
        keys = runs["job_key"].fillna("")
        twice = runs[keys.duplicated(keep=False) & (keys != "")]
        if len(twice):
            ids = ", ".join(str(r) for r in twice.get("run_id", twice.index).tolist()[:2])
            raise UserError(f"runs {ids} of the {side} both record job_key {twice['job_key'].iloc[0]} "
                            "(a key is recorded once per execution); delete the older run in MLflow.")


def _check_series(run_series: RunSeries) -> None:
    for run_id, artifacts in run_series.items():
        for name, frame in artifacts.items():
            needed = [job_series.SERIES_TIME] + (["rss_mb"] if name == SERIES_FILE else [])
            for column in needed:
                if column not in frame:
                    raise UserError(f"run {run_id}: artifact {name} has no `{column}` column; "
                                    "delete the artifact or re-run the job.")
            times = pd.to_numeric(frame[job_series.SERIES_TIME], errors="coerce")
            if times.isna().any() or not times.is_monotonic_increasing:
                raise UserError(f"run {run_id}: column `{job_series.SERIES_TIME}` of artifact {name} "
                                "is not increasing numbers; delete the artifact or re-run the job.")


# ---------------------------------------------------------------- factors


def _blank(value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return str(value).strip()


def _factors(frame: pd.DataFrame) -> dict[str, list[str]]:
    """Factor name -> its columns in this frame: the named FACTORS, then every other tag or param."""
    factors = {f.name: f.columns_in(frame) for f in FACTORS}
    claimed = {c for cols in factors.values() for c in cols}
    for column in frame.columns:
        if column in claimed or column in NOT_FACTORS or column.startswith(NOT_FACTOR_PREFIXES):
            continue
        if _is_metric(frame, column):
            continue
        factors[column.removeprefix("params.")] = [column]
    return {name: cols for name, cols in factors.items() if cols}


def _signature(frame: pd.DataFrame, columns: list[str]) -> pd.Series:
    """One hashable value per run for a factor (its columns joined; a missing value is blank)."""
    return frame[columns].apply(lambda row: "|".join(_blank(v) for v in row), axis=1)


def _mode(values: pd.Series) -> str:
    return str(values.mode().iloc[0]) if len(values) else ""


def _setting(runs: pd.DataFrame, columns: list[str]) -> dict[str, str]:
    """The cell's value of each column on one side (the most common one), blank when unset."""
    return {c: _mode(runs[c].map(_blank)) for c in columns}


def _short(column: str) -> str:
    return column.removeprefix("params.param.").removeprefix("params.")


def _describe(name: str, base: dict[str, str], cand: dict[str, str]) -> str:
    """'params: max_iter unset -> 3' (each column that differs, with its two values)."""
    changes = [
        f"{_short(c)} {base.get(c) or UNSET} -> {cand.get(c) or UNSET}"
        for c in dict.fromkeys([*base, *cand])
        if (base.get(c) or "") != (cand.get(c) or "")
    ]
    if len(changes) == 1 and changes[0].startswith(f"{name} "):
        return changes[0].replace(f"{name} ", f"{name}: ", 1)
    return f"{name}: " + ", ".join(changes)


def _cell_settings(runs: pd.DataFrame, recorded: list[str]) -> dict[str, dict[str, str]]:
    """The cell-level factors of one side: which folds, how many seeds, which figures recorded."""
    ok = runs[runs["ok"]]
    return {
        "folds": {"folds": ",".join(str(f) for f in sorted(runs["fold"].unique()))},
        "seeds": {"seeds": str(runs.groupby("fold")["seed"].nunique().max()) if len(runs) else "0"},
        "recorded metrics": {name: "recorded" if ok[name].notna().any() else "" for name in recorded},
    }


# ---------------------------------------------------------------- the diagnosis


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


def _stage_columns(jobs: pd.DataFrame, run_series: RunSeries) -> list[str]:
    """Add each run's per-stage figures to the job table; return the stage quantities found."""
    figures = {
        run_id: job_series.stage_figures(artifacts[SERIES_FILE])
        for run_id, artifacts in run_series.items()
        if SERIES_FILE in artifacts
    }
    names = sorted({name for values in figures.values() for name in values})
    if "run_id" not in jobs or not names:
        return []
    for name in names:
        jobs[name] = [figures.get(run_id, {}).get(name, np.nan) for run_id in jobs["run_id"]]
    return names


def compare(
    base_runs: pd.DataFrame,
    cand_runs: pd.DataFrame,
    *,
    pool: pd.DataFrame | None = None,
    thresholds: Thresholds | None = None,
    quantities: Iterable[Quantity] = QUANTITIES,
    series: RunSeries | None = None,
) -> Comparison:
    """Diagnose the candidate execution against the baseline; `pool` adds runs for the Shapley split;
    `series` (run id -> artifact -> frame) adds per-stage figures and the DTW alignments."""
    thresholds = thresholds or Thresholds()
    check_runs(base_runs, "baseline")
    check_runs(cand_runs, "candidate")
    run_series: RunSeries = series or {}
    _check_series(run_series)
    sides = [base_runs.assign(_side="baseline"), cand_runs.assign(_side="candidate")]
    if pool is not None:
        sides.append(pool.assign(_side="pool"))
    raw = pd.concat(sides, ignore_index=True)
    everything = job_table.prepare(raw)
    compared = {q.name: q for q in quantities if q.name in everything}
    for stage_name in _stage_columns(everything, run_series):
        stage, _, figure = stage_name.partition(": ")
        if figure in STAGE_QUANTITIES:
            compared[stage_name] = Quantity(stage_name)
    everything = pair_versions(everything)
    base = everything[everything["_side"] == "baseline"]
    cand = everything[everything["_side"] == "candidate"]
    factor_columns = _factors(raw)
    signatures = {name: _signature(everything, cols) for name, cols in factor_columns.items()}
    # Figures the record holds or lacks (a GPU figure on GPU hosts only); per-stage figures depend
    # on which stages were long enough to be sampled, so they are not part of it.
    recorded = [q.name for q in quantities if q.name in everything]
    relative_noise = _relative_noise(base, list(compared))
    base_cells = set(zip(base["dataset"], base["framework"], strict=True))
    cand_cells = set(zip(cand["dataset"], cand["framework"], strict=True))
    unmatched = [f"{d} / {f} (only in the baseline)" for d, f in sorted(base_cells - cand_cells)]
    unmatched += [f"{d} / {f} (only in the candidate)" for d, f in sorted(cand_cells - base_cells)]
    rows, alignments = [], {}
    for dataset, framework in sorted(base_cells & cand_cells):
        cell = (dataset, framework)
        in_all = (everything["dataset"] == dataset) & (everything["framework"] == framework)
        b_all, c_all = base[in_all[base.index]], cand[in_all[cand.index]]
        b_ok, c_ok = b_all[b_all["ok"]], c_all[c_all["ok"]]
        base_config = {f: _mode(signatures[f][b_all.index]) for f in factor_columns}
        cand_config = {f: _mode(signatures[f][c_all.index]) for f in factor_columns}
        base_values = {f: _setting(b_all, cols) for f, cols in factor_columns.items()}
        cand_values = {f: _setting(c_all, cols) for f, cols in factor_columns.items()}
        named = {f.name for f in FACTORS}
        # A tag that varies between the runs of one side (a run name, a time) labels runs; it is
        # not a setting of the cell.
        per_run = {
            f for f in factor_columns
            if f not in named and (signatures[f][b_all.index].nunique() > 1
                                   or signatures[f][c_all.index].nunique() > 1)
        }
        differing = [f for f in factor_columns if f not in per_run and base_config[f] != cand_config[f]]
        base_cell, cand_cell = _cell_settings(b_all, recorded), _cell_settings(c_all, recorded)
        if b_ok.empty or c_ok.empty:  # nothing measured on a side: what it recorded says nothing
            base_cell.pop("recorded metrics"), cand_cell.pop("recorded metrics")
        differing += [f for f in base_cell if base_cell[f] != cand_cell[f]]
        base_values.update(base_cell)
        cand_values.update(cand_cell)
        described = ", ".join(_describe(f, base_values[f], cand_values[f]) for f in differing)
        cell_alignments = _align_cell(b_ok, c_ok, run_series)
        if cell_alignments:
            alignments[cell] = cell_alignments
        where = "; ".join(job_series.describe(a, thresholds.cost) for a in cell_alignments)
        if b_ok.empty:
            unmatched.append(f"{dataset} / {framework} (every baseline job failed)")
        for quantity in compared.values():
            name = quantity.name
            in_base, in_cand = b_ok[name].notna().any(), c_ok[name].notna().any()
            if not b_ok.empty and not c_ok.empty and in_base != in_cand:
                # A stage too short to be sampled on one side is the sampling, not a difference.
                if name in recorded:
                    side = "baseline" if in_base else "candidate"
                    unmatched.append(f"{dataset} / {framework} {name} (recorded in the {side} only)")
                continue
            if _too_short(b_ok, name):
                continue
            row = _quantity_row(quantity, b_ok, c_ok, thresholds, relative_noise.get(name, float("nan")))
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
                        name,
                        row["baseline"],
                        row["current"],
                    )
                    if pd.notna(row["current"])
                    else (" + ".join(differing) or "none differ") + " (candidate jobs failed)"
                )
            else:
                main = "no change"
            rows.append(
                {"dataset": dataset, "framework": framework, **row, "main factor": main,
                 "differing factors": described, "where": where}
            )
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    return Comparison(table, thresholds, unmatched, alignments)


def _without_version(framework: str) -> str:
    return framework.partition("@")[0]


def pair_versions(jobs: pd.DataFrame) -> pd.DataFrame:
    """One framework at one version in the baseline and at another in the candidate (`hgb@1.7.2`
    against `hgb`, or `autogluon@1.5.0` against `autogluon@1.6.3`) is one cell, named
    "BASE -> CANDIDATE": its version is then a differing factor like any other (framework_version).
    Only where the pairing is unambiguous: one such framework on each side of the dataset."""
    jobs = jobs.copy()
    baseline, candidate = jobs["_side"] == "baseline", jobs["_side"] == "candidate"
    for dataset in sorted(set(jobs.loc[baseline, "dataset"]) & set(jobs.loc[candidate, "dataset"])):
        here = jobs["dataset"] == dataset
        base_frameworks = set(jobs.loc[here & baseline, "framework"])
        cand_frameworks = set(jobs.loc[here & candidate, "framework"])
        only_base, only_cand = base_frameworks - cand_frameworks, cand_frameworks - base_frameworks
        for family in {_without_version(f) for f in only_base} & {_without_version(f) for f in only_cand}:
            [old_base, *more_base] = sorted(f for f in only_base if _without_version(f) == family)
            [old_cand, *more_cand] = sorted(f for f in only_cand if _without_version(f) == family)
            if more_base or more_cand:
                continue
            cell = f"{old_base} -> {old_cand}"
            jobs.loc[here & baseline & (jobs["framework"] == old_base), "framework"] = cell
            jobs.loc[here & candidate & (jobs["framework"] == old_cand), "framework"] = cell
    return jobs


def _too_short(b_ok: pd.DataFrame, name: str) -> bool:
    """A stage's figures are compared only where the stage lasts long enough to be sampled well."""
    stage, _, figure = name.partition(": ")
    if not figure:
        return False
    duration = f"{stage}: duration_s"
    return not (duration in b_ok and bool(b_ok[duration].mean() >= MIN_STAGE_S))


def _align_cell(b_ok: pd.DataFrame, c_ok: pd.DataFrame, run_series: RunSeries) -> list[job_series.Alignment]:
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
    figure: Quantity, b_ok: pd.DataFrame, c_ok: pd.DataFrame, thresholds: Thresholds, relative_noise: float
) -> dict[str, object] | None:
    quantity = figure.name
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
    worse = change < 0 if figure.higher_is_better else change > 0
    relative = abs(change) / abs(baseline) if baseline else float("inf")
    threshold = thresholds.result if figure.threshold == "result" else thresholds.cost
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
            "differing factors": table["differing factors"],
            "where": table["where"],
        }
    )
    return out.reset_index(drop=True)


def top_regressions(comparison: Comparison, count: int = 3) -> list[tuple[str, str]]:
    """The cells of the `count` worst regressions (largest |z|, then relative change) that have series."""
    flagged = comparison.regressions.copy()
    flagged["_size"] = flagged["z"].abs().fillna(np.inf)
    flagged["_relative"] = flagged["change_pct"].abs().fillna(np.inf)
    cells: list[tuple[str, str]] = []
    for row in flagged.sort_values(["_size", "_relative"], ascending=False).itertuples(index=False):
        cell = (str(row.dataset), str(row.framework))
        if cell not in cells and comparison.alignments.get(cell):
            cells.append(cell)
    return cells[:count]


def write_folder(comparison: Comparison, folder: Path, base_label: str, cand_label: str) -> Path:
    """compare.csv, compare.md and, for the top 3 regressions, their aligned series as small PNGs."""
    from tasks.report import plots

    folder.mkdir(parents=True, exist_ok=True)
    comparison.table.to_csv(folder / "compare.csv", index=False)
    figures = []
    for rank, (dataset, framework) in enumerate(top_regressions(comparison), start=1):
        for alignment in comparison.alignments[(dataset, framework)]:
            path = folder / f"series_{rank}_{alignment.column}.png"
            title = f"{dataset} / {framework}: {alignment.label}"
            plots.aligned_series(alignment, path, title=title, base_label="baseline", cand_label="current")
            figures.append((title, path.name, job_series.describe(alignment, comparison.thresholds.cost)))
    text = markdown(comparison, base_label, cand_label, figures)
    (folder / "compare.md").write_text(text, encoding="utf-8")
    return folder


def markdown(
    comparison: Comparison, base_label: str, cand_label: str, figures: Iterable[tuple[str, str, str]] = ()
) -> str:
    """The diagnosis as a page; `figures` are (title, file name, caption) of plots beside it."""
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
    table = comparison.table
    unmeasured = int((table["z"].isna() & table["current"].notna()).sum()) if len(table) else 0
    if unmeasured:
        lines += [f"No noise estimate for {unmeasured} figure(s): the baseline has a single run per "
                  "cell and no cell with two, so the threshold alone decides them. Run more seeds "
                  "or folds to test a change against the noise.", ""]
    if comparison.unmatched:
        lines += ["Not compared: " + "; ".join(comparison.unmatched) + ".", ""]
    if rows.empty:
        lines.append("Nothing in common to compare.")
    else:
        lines += ["| " + " | ".join(rows.columns) + " |", "|" + "---|" * len(rows.columns)]
        lines += [
            "| " + " | ".join(_fmt(v).replace("|", "/") for v in row) + " |"
            for row in rows.itertuples(index=False)
        ]
    figures = list(figures)
    if figures:
        lines += ["", "## Where the top regressions happened (series aligned by DTW)", ""]
        for title, name, caption in figures:
            lines += [f"**{title}**: {caption}", "", f"![{title}]({name})", ""]
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


def compare_executions(
    base_id: str,
    cand_id: str,
    *,
    also: Iterable[str] = (),
    uri: str | None = None,
    thresholds: Thresholds | None = None,
) -> Comparison:
    """compare() on two executions in the store, with their job runs' series; `also` fills the pool."""
    from tasks.tracking import read

    base_runs = read.job_runs(execution_id=base_id, uri=uri)
    cand_runs = read.job_runs(execution_id=cand_id, uri=uri)
    pool = [read.job_runs(execution_id=other, uri=uri) for other in also]
    run_ids = [
        str(run_id)
        for frame in (base_runs, cand_runs)
        if "run_id" in frame
        for run_id, status in zip(frame["run_id"], frame.get("status", ""), strict=False)
        if status == "ok"
    ]
    return compare(
        base_runs,
        cand_runs,
        pool=pd.concat(pool, ignore_index=True) if pool else None,
        thresholds=thresholds,
        series=read.job_series(run_ids, uri=uri),
    )


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
    result = compare_executions(baseline_id, execution_id, uri=uri, thresholds=thresholds)
    read.set_tag(execution_id, REGRESSION_TAG, "true" if result.regressed else "false", uri=uri)
    read.set_tag(execution_id, BASELINE_TAG, baseline_id, uri=uri)
    text = markdown(result, baseline_id, execution_id)
    return NightlyComparison(execution_id, baseline_id, result, text)
