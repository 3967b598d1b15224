"""Benchmark: a small real suite run with and without its `adaptive:` block, and what each cost.

A scratch project with small datasets (default breast_cancer, penguins and wage: binary, multiclass
and regression), the constant baseline, hgb and rf, one seed, the `test` budget and up to 5 folds.
The suite runs twice, each a fresh execution: the full grid, then in rounds (adaptive, pairwise at
95%, rounds from 3 folds; rope and futility as asked; with `--top-k K`, the top K across datasets
instead of pairwise). Prints, for each: the jobs run, the
CPU-seconds the jobs recorded (each job's process tree; the harness's own, Prefect's and MLflow's
are not in it) and the wall seconds of the run; then the adaptive run's share of the full's, and
the folds each cell got in rounds.
The machine's load changes the seconds, not the jobs: say how loaded it was when quoting them.
Run: `python -m bench.bench_adaptive_compute [--datasets a,b] [--folds 5] [--min-folds 3] [--rope 0.01]
[--futility] [--top-k K]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from bench.scratch_project import scratch_project

DATASETS = ("breast_cancer", "penguins", "wage")
FRAMEWORKS = ("constant", "hgb", "rf")
SMOKE_ARGS: tuple[str, ...] = ("--datasets", "breast_cancer", "--folds", "3", "--min-folds", "2")


def _suite(datasets: list[str], folds: int, adaptive: dict[str, object] | None) -> dict[str, object]:
    suite: dict[str, object] = {"datasets": datasets, "frameworks": list(FRAMEWORKS), "folds": folds,
                                "seeds": [0], "budget": "test"}
    if adaptive is not None:
        suite["adaptive"] = adaptive
    return suite


def main(argv: list[str] | None = None) -> pd.DataFrame:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_adaptive_compute",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated dataset cards")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--min-folds", type=int, default=3, help="the adaptive run's first round")
    parser.add_argument("--rope", type=float, default=0.0, help="the adaptive block's rope")
    parser.add_argument("--futility", action="store_true", help="the adaptive block's futility: true")
    parser.add_argument("--top-k", type=int, default=None,
                        help="decide the top K frameworks across datasets instead of pairwise")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    datasets = [name.strip() for name in args.datasets.split(",") if name.strip()]
    home = Path(tempfile.mkdtemp(prefix="bench-adaptive-compute-"))
    scratch_project(home, datasets)
    os.environ["AUTOML_EVAL_HOME"] = str(home)
    os.chdir(home)
    # After AUTOML_EVAL_HOME points at the scratch project: these read it when imported.
    from flows.cli_run import configure_embedded_prefect

    configure_embedded_prefect()
    from flows.benchmark import benchmark
    from tasks.report import jobs as job_table
    from tasks.tracking import read

    adaptive: dict[str, object] = {"confidence": 0.95, "min_folds": args.min_folds, "max_folds": args.folds,
                                   "decide": ["pairwise"], "rope": args.rope, "futility": args.futility}
    if args.top_k is not None:
        adaptive.update(decide=["top_k"], top_k=args.top_k)
    rows, folds_per_cell = [], pd.Series(dtype=int)
    for name, block in (("full grid", None), ("adaptive", adaptive)):
        suite = "compute_full" if block is None else "compute_adaptive"
        (home / "specs" / "suites" / f"{suite}.yaml").write_text(
            yaml.safe_dump(_suite(datasets, args.folds, block), sort_keys=False))
        started = time.perf_counter()
        outcome = benchmark(suite=suite, execution="new", parallel=1, report=False)
        wall = time.perf_counter() - started
        ran = job_table.prepare(read.job_runs(execution_id=outcome["execution_id"]))
        cpu = pd.to_numeric(ran["cpu_s"], errors="coerce") if "cpu_s" in ran else pd.Series(dtype=float)
        folds_per_cell = ran.groupby(["dataset", "framework"])["fold"].nunique()
        rows.append({"run": name, "jobs": len(ran), "jobs ok": int(ran["ok"].sum()),
                     "job CPU s": round(float(cpu.sum()), 1), "wall s": round(wall, 1)})
    table = pd.DataFrame(rows).set_index("run")
    share = table.loc["adaptive"] / table.loc["full grid"]
    print(f"{', '.join(datasets)} x {', '.join(FRAMEWORKS)}, {args.folds} folds, budget test, one job "
          f"at a time; adaptive: {adaptive} (os.getloadavg at the end: "
          f"{', '.join(f'{load:.1f}' for load in os.getloadavg())} on {os.cpu_count()} cores)")
    print(table.to_string())
    print("adaptive / full: " + ", ".join(f"{column} {share[column]:.0%}" for column in table.columns))
    print("folds per cell in the adaptive run:")
    print(folds_per_cell.unstack("framework").to_string())
    shutil.rmtree(home, ignore_errors=True)
    return table


if __name__ == "__main__":
    main()
