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

This module holds what is compared (QUANTITIES, their direction and thresholds) and the decision per
cell; the noise and z-scores are in compare_stats, the factors, Shapley split and DTW alignment in
compare_attribution, the page in compare_markdown, and executions looked up in MLflow in compare_store.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypedDict

import numpy as np
import pandas as pd

from tasks import metric_registry
from tasks.errors import UserError
from tasks.report import jobs as job_table
from tasks.report import series as job_series
from tasks.report.compare_attribution import (
    FACTORS,
    RunSeries,
    align_cell,
    attribute,
    cell_settings,
    describe_factor,
    factor_columns,
    mode,
    setting,
    signature,
)
from tasks.report.compare_stats import noise_std, relative_noise, z_score
from tasks.resources import SERIES_FILE, SERIES_TIME
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
    Quantity("serve_cold_start_s"),
    Quantity("serve_server_cpu_s_per_1k"),
    Quantity("serve_server_peak_rss_mb"),
)
# Per-stage figures of each job's resource samples (tasks.report.series.stage_figures), compared as
# "STAGE: NAME" with the cost threshold; stages shorter than MIN_STAGE_S are a few samples long.
STAGE_QUANTITIES: tuple[str, ...] = ("duration_s", "peak_rss_mb")
MIN_STAGE_S = 1.0
DEFAULT_RESULT_THRESHOLD = 0.02  # 2% of the baseline's |result|: AUC 0.85 -> 0.017
DEFAULT_COST_THRESHOLD = 0.25  # costs are noisier: 25% slower or bigger
DEFAULT_Z_THRESHOLD = 3.0
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


# ---------------------------------------------------------------- what the store holds


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
            needed = [SERIES_TIME] + (["rss_mb"] if name == SERIES_FILE else [])
            for column in needed:
                if column not in frame:
                    raise UserError(f"run {run_id}: artifact {name} has no `{column}` column; "
                                    "delete the artifact or re-run the job.")
            times = pd.to_numeric(frame[SERIES_TIME], errors="coerce")
            if times.isna().any() or not times.is_monotonic_increasing:
                raise UserError(f"run {run_id}: column `{SERIES_TIME}` of artifact {name} "
                                "is not increasing numbers; delete the artifact or re-run the job.")


# ---------------------------------------------------------------- the diagnosis


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
    factors = factor_columns(raw, {q.name for q in QUANTITIES})
    signatures = {name: signature(everything, cols) for name, cols in factors.items()}
    # Figures the record holds or lacks (a GPU figure on GPU hosts only); per-stage figures depend
    # on which stages were long enough to be sampled, so they are not part of it.
    recorded = [q.name for q in quantities if q.name in everything]
    noise_ratios = relative_noise(base, list(compared))
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
        base_config = {f: mode(signatures[f][b_all.index]) for f in factors}
        cand_config = {f: mode(signatures[f][c_all.index]) for f in factors}
        base_values = {f: setting(b_all, cols) for f, cols in factors.items()}
        cand_values = {f: setting(c_all, cols) for f, cols in factors.items()}
        named = {f.name for f in FACTORS}
        # A tag that varies between the runs of one side (a run name, a time) labels runs; it is
        # not a setting of the cell.
        per_run = {
            f for f in factors
            if f not in named and (signatures[f][b_all.index].nunique() > 1
                                   or signatures[f][c_all.index].nunique() > 1)
        }
        differing = [f for f in factors if f not in per_run and base_config[f] != cand_config[f]]
        base_cell, cand_cell = cell_settings(b_all, recorded), cell_settings(c_all, recorded)
        if b_ok.empty or c_ok.empty:  # nothing measured on a side: what it recorded says nothing
            base_cell.pop("recorded metrics"), cand_cell.pop("recorded metrics")
        differing += [f for f in base_cell if base_cell[f] != cand_cell[f]]
        base_values.update(base_cell)
        cand_values.update(cand_cell)
        described = ", ".join(describe_factor(f, base_values[f], cand_values[f]) for f in differing)
        cell_alignments = align_cell(b_ok, c_ok, run_series)
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
            row = _quantity_row(quantity, b_ok, c_ok, thresholds, noise_ratios.get(name, float("nan")))
            if row is None:
                continue
            if row["regression"] or abs(row["change"] if pd.notna(row["change"]) else 0) > 0:
                main = (
                    attribute(
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


class QuantityRow(TypedDict):
    """One quantity of one (dataset, framework) cell: both sides' means, the change and its verdict."""

    metric: str
    current: float
    baseline: float
    change: float
    change_pct: float
    z: float
    regression: bool


def _quantity_row(
    figure: Quantity, b_ok: pd.DataFrame, c_ok: pd.DataFrame, thresholds: Thresholds, relative_noise: float
) -> QuantityRow | None:
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
    z = z_score(change, std, len(base_values), len(cand_values))
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
