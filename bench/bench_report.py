"""Benchmark: `automl-eval report` over 5,000 synthetic job runs in a fresh sqlite MLflow store.

Prints the seconds to read the runs from MLflow and to build the whole report (tables, statistics,
every figure), the figure docs/benchmarks.md quotes. Target: <= 20 s on a 2-core machine.
Run: `python -m bench.bench_report [--datasets 20] [--frameworks 10] [--folds 5] [--seeds 5]` from the
project root (part of `make bench`, at the defaults: the 5,000 runs the target is about).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.synthetic_runs import SyntheticSuite, dataset_names, synthetic_jobs, write_execution

DATASETS, FRAMEWORKS, FOLDS, SEEDS = 20, 10, 5, 5  # 20 x 10 x 5 x 5 = 5,000 job runs
# The smoke run of tests/integration/test_bench_smoke.py: one dataset per problem type and three
# frameworks (a failing pair among them), so every table and figure of the report is still drawn.
SMOKE_ARGS: tuple[str, ...] = ("--datasets", "3", "--frameworks", "3", "--folds", "2", "--seeds", "1")


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=int, default=DATASETS,
                        help=f"synthetic datasets (default {DATASETS})")
    parser.add_argument("--frameworks", type=int, default=FRAMEWORKS,
                        help=f"frameworks, `constant` among them (default {FRAMEWORKS})")
    parser.add_argument("--folds", type=int, default=FOLDS, help=f"folds per dataset (default {FOLDS})")
    parser.add_argument("--seeds", type=int, default=SEEDS, help=f"seeds per fold (default {SEEDS})")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    strengths = {"constant": 0.0, **{f"framework{i:02d}": 0.2 * i for i in range(1, args.frameworks)}}
    # One (dataset, framework) pair whose jobs all fail, so the report's failure paths are timed too:
    # ds03_binary x framework05 at the defaults, the nearest pair that exists at smaller sizes.
    failing = (dataset_names(args.datasets)[min(3, args.datasets - 1)],
               list(strengths)[min(5, len(strengths) - 1)])
    spec = SyntheticSuite(
        suite="bench",
        datasets=args.datasets,
        strengths=strengths,
        folds=args.folds,
        seeds=tuple(range(args.seeds)),
        fail=[failing],
    )
    jobs = synthetic_jobs(spec)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        started = time.perf_counter()
        execution_id = write_execution(uri, jobs, suite="bench", bulk=True)
        fill_s = time.perf_counter() - started

        from tasks.report.build import build_report
        from tasks.tracking import read

        started, cpu_started = time.perf_counter(), time.process_time()
        runs = read.job_runs(execution_id=execution_id, uri=uri)
        read_s = time.perf_counter() - started
        report = build_report(runs, Path(tmp) / "report", title="bench")
        build_s = time.perf_counter() - started - read_s
        read.log_folder(execution_id, report.folder, uri=uri)
        total_s = time.perf_counter() - started
        cpu_s = time.process_time() - cpu_started
    figures = {
        "runs": float(len(runs)),
        "fill_store_s": fill_s,
        "read_runs_s": read_s,
        "build_report_s": build_s,
        "report_total_s": total_s,
        "report_cpu_s": cpu_s,
    }
    print(
        f"report over {len(runs)} job runs (sqlite MLflow store): read {read_s:.1f} s"
        f" + build {build_s:.1f} s"
        f" + log artifacts = {total_s:.1f} s total, {cpu_s:.1f} s CPU (target <= 20 s);"
        f" store filled in {fill_s:.1f} s"
    )
    return figures


if __name__ == "__main__":
    main()
