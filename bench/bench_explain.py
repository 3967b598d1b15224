"""Explanations and export per framework on the smoke datasets: what they cost, whether ONNX ships.

For each (dataset, framework): one job (fold 0, seed 0, the smoke budget) in a scratch folder,
then the `explain` and `export` post-job evaluations on its saved model, each in its own watched
process as in a suite. Prints one line per job (fit time, permutation and SHAP wall time, ONNX
outcome, native vs ONNX p50 latency and batch throughput), then per framework: explanation time
against fit time and the ONNX export success rate.

Run: `python -m bench.bench_explain [--frameworks a,b] [--datasets x,y] [--explain-s N]`.
Figures, not a test: they depend on the machine and on what else runs on it.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

DATASETS = ("breast_cancer", "penguins", "wage")  # the smoke suite's
FRAMEWORKS = ("constant", "hgb", "rf", "flaml")  # --frameworks adds autogluon, h2o (minutes each)
# The smoke run of tests/integration/test_bench_smoke.py: one cheap job and a short explain block.
SMOKE_ARGS: tuple[str, ...] = ("--frameworks", "constant", "--datasets", "breast_cancer", "--explain-s", "5")


def measure(dataset: str, framework: str, explain_s: int, scratch: Path) -> dict[str, Any]:
    from tasks.evaluations.stage import run_evaluations
    from tasks.jobs import run_job
    from tasks.plan import Job
    from tasks.specs import load_budget, load_dataset_spec

    spec = load_dataset_spec(dataset)
    budget = load_budget("smoke")
    job = Job("bench_explain", spec.name, "bench", framework, None, 0, 0, budget, {})
    job_dir = scratch / job.key
    result = run_job(job, spec, job_dir)
    row: dict[str, Any] = {"dataset": dataset, "framework": framework, "job": result.status,
                           "fit_s": result.costs.get("fit_s")}
    if result.status != "ok":
        return row
    blocks = {"explain": {"enabled": True, "time_s": explain_s}, "export": {"enabled": True}}
    outcome = run_evaluations(job, spec, job_dir, result, blocks).evaluations
    explain, export = outcome["explain"], outcome["export"]
    figures = {**explain.get("metrics", {}), **export.get("metrics", {})}
    row.update({
        "explain": explain["status"],
        "shap_explainer": explain.get("tags", {}).get("explain_shap_explainer", ""),
        "perm_s": figures.get("explain_perm_s"), "shap_s": figures.get("explain_shap_s"),
        "explain_wall_s": explain.get("wall_s"),
        "onnx": export.get("tags", {}).get("export_onnx", export["status"]),
        "parity": figures.get("onnx_parity_max_abs"),
        "native_p50_ms": figures.get("native_latency_p50_ms"),
        "onnx_p50_ms": figures.get("onnx_latency_p50_ms"),
        "speedup_p50": figures.get("onnx_speedup_p50"),
        "native_rows_s": figures.get("native_throughput_rows_s"),
        "onnx_rows_s": figures.get("onnx_throughput_rows_s"),
        "mojo_mb": figures.get("mojo_mb"),
        "onnx_reason": export.get("tags", {}).get("export_onnx.reason", "")[:120],
    })
    return row


def summary(rows: pd.DataFrame) -> pd.DataFrame:
    ok = rows[rows["job"] == "ok"]
    grouped = ok.groupby("framework")
    return pd.DataFrame({
        "jobs": grouped.size(),
        "fit_s": grouped["fit_s"].median(),
        "perm_s": grouped["perm_s"].median(),
        "shap_s": grouped["shap_s"].median(),
        "explain_over_fit": (grouped["explain_wall_s"].median() / grouped["fit_s"].median()),
        "onnx_ok_rate": grouped["onnx"].agg(lambda s: float((s == "ok").mean())),
        "native_p50_ms": grouped["native_p50_ms"].median(),
        "onnx_p50_ms": grouped["onnx_p50_ms"].median(),
        "native_rows_s": grouped["native_rows_s"].median(),
        "onnx_rows_s": grouped["onnx_rows_s"].median(),
    }).reset_index()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--datasets", default=",".join(DATASETS))
    parser.add_argument("--explain-s", type=int, default=60, help="the explain block's time_s")
    args = parser.parse_args(argv if argv is not None else [])
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for dataset in args.datasets.split(","):
            for framework in args.frameworks.split(","):
                row = measure(dataset, framework, args.explain_s, Path(scratch))
                print(json.dumps(row, default=lambda v: round(v, 4) if isinstance(v, float) else str(v)),
                      flush=True)
                rows.append(row)
    table = summary(pd.DataFrame(rows))
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(3).to_string(index=False))
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
