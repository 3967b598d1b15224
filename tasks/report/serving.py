"""The report's serving part: the load table, latency against throughput, and result against the
highest rate held within the SLO (tasks/evaluations/serving.py records the figures).

- the load table: per dataset, framework and concurrency, the mean (over folds and seeds) of the
  mean, p95 and p99 latency, the requests per second and the error rate: the table load tests quote;
- the latency-throughput figure: per dataset, p99 against achieved requests/s, a line per framework;
- the front: per dataset, `result` (up) against `serve_max_qps_at_slo` (up), and who is on it;
- the stacks: where a model was served by more than one stack (serving.stacks), each stack's median
  latency at one user, highest rate at the SLO, cold start to first answer, peak RSS, CPU seconds per
  1,000 requests and the cost that makes per 100 QPS (cores busy), and the best stack per model;
- the canary: where a model shared its address with a second version (serving.canary), the share
  the second version got, both versions' p50/p99 and error rate, and how often they agreed;
- the open loops not judged: a served job without `serve_max_qps_at_slo`, with the evaluation's
  reason (LoadGen could not judge its rates in the time given), instead of a rate of 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt  # the Agg backend: tasks/report/plots.py sets it
import numpy as np
import pandas as pd

from tasks.report.pareto import on_front
from tasks.report.plots import _colors, _save
from tasks.vocabulary import RESULT

STEP_METRIC = re.compile(r"^serve_c(\d+)_(mean_ms|p50_ms|p95_ms|p99_ms|rps|error_rate)$")
MAX_QPS = "serve_max_qps_at_slo"
SLO = "serve_slo_ms"
REASON_TAG = "evaluation.serving.reason"  # tasks/tracking/job_run.py tags each evaluation's reason
# A figure of the stack table: serve_FIGURE (the mlflow stack) or serve_STACK_FIGURE (another).
STACK_FIGURES = ("c1_p50_ms", "max_qps_at_slo", "startup_s", "cold_start_s", "server_peak_rss_mb",
                 "server_cpu_s_per_1k")
STACK_FIGURE = re.compile(rf"^serve_(?:([a-z0-9]+)_)?({'|'.join(STACK_FIGURES)})$")
# Cores busy per 100 QPS from CPU seconds per 1,000 requests: 100 requests a second cost a tenth of them.
CORES_PER_100_QPS = "cores_per_100_qps"
DEFAULT_STACK = "mlflow"  # tasks.evaluations.serving.DEFAULT_STACK (reports read figures, not evaluations)
# The canary's figures (serving.canary), as the report's table names them.
CANARY_FIGURES = {
    "serve_canary_share_routed": "share_routed", "serve_canary_agreement": "agreement",
    "serve_canary_primary_p50_ms": "primary_p50_ms", "serve_canary_primary_p99_ms": "primary_p99_ms",
    "serve_canary_primary_error_rate": "primary_error_rate", "serve_canary_p50_ms": "canary_p50_ms",
    "serve_canary_p99_ms": "canary_p99_ms", "serve_canary_error_rate": "canary_error_rate",
}
LOAD_COLUMNS = ["dataset", "framework", "concurrency", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "rps",
                "error_rate", "jobs"]


def has_serving(jobs: pd.DataFrame) -> bool:
    return any(STEP_METRIC.match(str(column)) for column in jobs.columns) or MAX_QPS in jobs


def _long_figures(jobs: pd.DataFrame, pattern: re.Pattern[str], key: str,
                  key_of: Callable[[re.Match[str]], Any]) -> pd.DataFrame:
    """dataset, framework, `key`, figure, value: one row per ok job and metric column matching
    `pattern` (its second group is the figure, `key_of` reads the key from the match)."""
    ok = jobs[jobs["ok"]]
    parts = []
    for column in ok.columns:
        match = pattern.match(str(column))
        if match is None:
            continue
        values = pd.to_numeric(ok[column], errors="coerce")
        parts.append(ok.loc[values.notna(), ["dataset", "framework"]].assign(
            **{key: key_of(match)}, figure=match.group(2), value=values[values.notna()]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def load_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """LOAD_COLUMNS: one row per (dataset, framework, concurrency), means over its ok jobs."""
    long = _long_figures(jobs, STEP_METRIC, "concurrency", lambda match: int(match.group(1)))
    if long.empty:
        return pd.DataFrame(columns=LOAD_COLUMNS)
    table = long.pivot_table(index=["dataset", "framework", "concurrency"], columns="figure", values="value",
                             aggfunc="mean")
    counts = long[long["figure"] == "p99_ms"].groupby(["dataset", "framework", "concurrency"]).size()
    table["jobs"] = counts
    table = table.reset_index().reindex(columns=LOAD_COLUMNS)
    return table.sort_values(["dataset", "framework", "concurrency"]).reset_index(drop=True)


def qps_front(jobs: pd.DataFrame) -> pd.DataFrame:
    """dataset, framework, result, serve_max_qps_at_slo (means), slo_ms, on_front (both up)."""
    ok = jobs[jobs["ok"]].copy()
    if MAX_QPS not in ok:
        return pd.DataFrame(columns=["dataset", "framework", RESULT, MAX_QPS, "slo_ms", "on_front"])
    ok[MAX_QPS] = pd.to_numeric(ok[MAX_QPS], errors="coerce")
    ok["slo_ms"] = pd.to_numeric(ok[SLO], errors="coerce") if SLO in ok else np.nan
    points = ok.dropna(subset=[MAX_QPS]).groupby(["dataset", "framework"], as_index=False).agg(
        **{RESULT: (RESULT, "mean"), MAX_QPS: (MAX_QPS, "mean"), "slo_ms": ("slo_ms", "max")})
    points["on_front"] = False
    for _, block in points.groupby("dataset"):
        # A higher rate is better: as a cost, its negative.
        points.loc[block.index, "on_front"] = on_front(block[RESULT].to_numpy(), -block[MAX_QPS].to_numpy())
    return points


def not_judged(jobs: pd.DataFrame) -> list[str]:
    """'dataset x framework: reason' for each served ok job whose open loop gave no highest rate."""
    ok = jobs[jobs["ok"]]
    if REASON_TAG not in ok:
        return []
    steps = [column for column in ok.columns if STEP_METRIC.match(str(column))]
    served = ok[ok[steps].notna().any(axis=1)] if steps else ok.iloc[0:0]
    missing = served[pd.to_numeric(served[MAX_QPS], errors="coerce").isna()] if MAX_QPS in served else served
    reasons = missing[missing[REASON_TAG].fillna("").astype(str).str.strip() != ""]
    return sorted({f"{row.dataset} x {row.framework}: {str(row[REASON_TAG]).splitlines()[0]}"
                   for _, row in reasons.iterrows()})


def stack_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """dataset, framework, stack, STACK_FIGURES and cores_per_100_qps (means over ok jobs), best: the
    stack with the highest rate at the SLO (then the fewest cores per 100 QPS, then the lowest
    latency); empty with one stack only."""
    long = _long_figures(jobs, STACK_FIGURE, "stack", lambda match: match.group(1) or DEFAULT_STACK)
    if long.empty or long["stack"].nunique() < 2:
        return pd.DataFrame()
    table = long.pivot_table(index=["dataset", "framework", "stack"], columns="figure", values="value",
                             aggfunc="mean").reset_index()
    for figure in STACK_FIGURES:
        table[figure] = table.get(figure, np.nan)
    table[CORES_PER_100_QPS] = table["server_cpu_s_per_1k"] * 100 / 1000
    ranked = table.sort_values(["max_qps_at_slo", CORES_PER_100_QPS, "c1_p50_ms"],
                               ascending=[False, True, True], na_position="last")
    best = ranked.groupby(["dataset", "framework"])["stack"].first()
    table["best"] = [best[(row.dataset, row.framework)] == row.stack for row in table.itertuples()]
    return table[["dataset", "framework", "stack", *STACK_FIGURES, CORES_PER_100_QPS, "best"]]


def canary_table(jobs: pd.DataFrame) -> pd.DataFrame:
    """dataset, framework (the primary's) and the canary's figures, means over the ok jobs that had a
    canary; empty when none had."""
    present = [name for name in CANARY_FIGURES if name in jobs.columns]
    if not present:
        return pd.DataFrame()
    ok = jobs[jobs["ok"]]
    values = ok[present].apply(pd.to_numeric, errors="coerce")
    had = ok[values.notna().any(axis=1)]
    if had.empty:
        return pd.DataFrame()
    frame = had[["dataset", "framework"]].join(values.loc[had.index])
    table = frame.groupby(["dataset", "framework"], as_index=False).mean()
    return table.rename(columns=CANARY_FIGURES)


def latency_throughput_figure(table: pd.DataFrame, slo_ms: float | None, path: Path) -> Path:
    """Per dataset, p99 latency (log) against achieved requests/s, one line per framework."""
    datasets = sorted(table["dataset"].unique())
    figure, axes_row = plt.subplots(1, len(datasets), figsize=(5.5 * len(datasets), 4.2), squeeze=False)
    colors = _colors(sorted(table["framework"].unique()))
    for axes, dataset in zip(axes_row[0], datasets, strict=True):
        block = table[table["dataset"] == dataset]
        for framework, line in block.groupby("framework"):
            line = line.sort_values("concurrency")
            axes.plot(line["rps"], line["p99_ms"], marker="o", color=colors[framework], label=framework)
            for point in line.itertuples():
                axes.annotate(f"c{point.concurrency}", (point.rps, point.p99_ms), fontsize=7,
                              textcoords="offset points", xytext=(3, 3))
        if slo_ms:
            axes.axhline(slo_ms, color="tab:red", linestyle="--", linewidth=1, label=f"SLO {slo_ms:g} ms")
        axes.set_yscale("log")
        axes.set_xlabel("achieved requests/s (closed loop)")
        axes.set_ylabel("p99 latency (ms, log scale)")
        axes.set_title(dataset)
        axes.legend(fontsize=8)
    return _save(figure, path)


def qps_front_figure(points: pd.DataFrame, path: Path) -> Path:
    """Per dataset, result against the highest rate held within the SLO; the front joined."""
    datasets = sorted(points["dataset"].unique())
    figure, axes_row = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 4), squeeze=False)
    colors = _colors(sorted(points["framework"].unique()))
    for axes, dataset in zip(axes_row[0], datasets, strict=True):
        block = points[points["dataset"] == dataset]
        for point in block.itertuples():
            axes.scatter(getattr(point, MAX_QPS), getattr(point, RESULT), color=colors[point.framework],
                         edgecolor="black" if point.on_front else "none", s=60, label=point.framework)
        front = block[block["on_front"]].sort_values(MAX_QPS)
        axes.plot(front[MAX_QPS], front[RESULT], color="black", linewidth=1, alpha=0.6)
        slo = block["slo_ms"].max()
        axes.set_xlabel(f"max requests/s with p99 <= {slo:g} ms" if pd.notna(slo) else
                        "max requests/s at the SLO")
        axes.set_ylabel("result (higher is better)")
        axes.set_title(dataset)
        axes.legend(fontsize=8)
    return _save(figure, path)


def section(jobs: pd.DataFrame, folder: Path,
            table_markdown: Callable[[pd.DataFrame], str]) -> tuple[list[str], list[Path]]:
    """The serving section of report.md (empty when no job was served) and its figures."""
    if not has_serving(jobs):
        return [], []
    table = load_table(jobs)
    points = qps_front(jobs)
    figures: list[Path] = []
    lines = ["## Serving (MLflow scoring server under load)", ""]
    slo = points["slo_ms"].max() if not points.empty else None
    if not table.empty:
        table.to_csv(folder / "serving_load.csv", index=False)
        figures.append(latency_throughput_figure(table, slo if slo and pd.notna(slo) else None,
                                                 folder / "serving_latency_throughput.png"))
        lines += ["Closed loop: N concurrent users, each sending its next request when the last came back; "
                  "latency of POST /invocations in ms, means over folds and seeds.", "",
                  table_markdown(table.drop(columns=["p50_ms"])), ""]
    if not points.empty:
        points.to_csv(folder / "serving_front.csv", index=False)
        figures.append(qps_front_figure(points, folder / "serving_pareto_max_qps.png"))
        lines += ["Open loop: the highest Poisson arrival rate held within the SLO with no errors: MLPerf "
                  "LoadGen's highest VALID target QPS in its server scenario (open_loop: loadgen; its "
                  "minimum duration, query count and early stopping applied), or the Locust search's "
                  "(open_loop: locust); on_front = no framework has both a higher result and a higher "
                  "rate.", "", table_markdown(points), ""]
    captions = {
        "stacks": "Stacks: the same model behind each serving stack (serving.stacks), after each "
                  "answered the test fold as the model does in process. cold_start_s: server start to its "
                  "first answer; server_peak_rss_mb and server_cpu_s_per_1k: its process tree over the "
                  "whole load; cores_per_100_qps: the cores its CPU seconds per 1,000 requests keep busy at "
                  "100 QPS (the stack's cost per 100 QPS). best = the highest rate at the SLO, then the "
                  "fewest cores per 100 QPS, then the lowest median latency at one user.",
        "canary": "Canary: the model (primary) and a second version behind one address (serving.canary); "
                  "share_routed: the share the router sent to the second version; each version's latency "
                  "as the router saw its answers, ms; agreement: the share of a test-fold sample both "
                  "versions predict alike.",
    }
    for name, part in (("stacks", stack_table(jobs)), ("canary", canary_table(jobs))):
        if not part.empty:
            part.to_csv(folder / f"serving_{name}.csv", index=False)
            lines += [captions[name], "", table_markdown(part), ""]
    unjudged = not_judged(jobs)
    if unjudged:
        lines += ["Open loop without a highest rate (not a rate of 0: the load could not judge it):", "",
                  *(f"- {line}" for line in unjudged), ""]
    return lines, figures
