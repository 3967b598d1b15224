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
    spec = suite_of(args.datasets, args.frameworks, args.folds, args.seeds)
    jobs = synthetic_jobs(spec)
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        uri = f"sqlite:///{Path(tmp) / 'mlflow.db'}"
        started = time.perf_counter()
        execution_id = write_execution(uri, jobs, suite="bench", bulk=True)
        fill_s = time.perf_counter() - started
        figures = {"fill_store_s": fill_s, **time_report(execution_id, uri, Path(tmp) / "report")}
    runs, read_s, build_s = figures["runs"], figures["read_runs_s"], figures["build_report_s"]
    total_s, cpu_s = figures["report_total_s"], figures["report_cpu_s"]
    print(
        f"report over {runs:.0f} job runs (sqlite MLflow store): read {read_s:.1f} s"
        f" + build {build_s:.1f} s"
        f" + log artifacts = {total_s:.1f} s total, {cpu_s:.1f} s CPU (target <= 20 s);"
        f" store filled in {fill_s:.1f} s"
    )
    return figures


def suite_of(datasets: int, frameworks: int, folds: int, seeds: int, suite: str = "bench") -> SyntheticSuite:
    """The benchmark's synthetic suite: `constant` and frameworks of rising strength, and one
    (dataset, framework) pair whose jobs all fail, so the report's failure paths are timed too
    (ds03_binary x framework05 at the defaults, the nearest pair that exists at smaller sizes)."""
    strengths = {"constant": 0.0, **{f"framework{i:02d}": 0.2 * i for i in range(1, frameworks)}}
    failing = (dataset_names(datasets)[min(3, datasets - 1)], list(strengths)[min(5, len(strengths) - 1)])
    return SyntheticSuite(suite=suite, datasets=datasets, strengths=strengths, folds=folds,
                          seeds=tuple(range(seeds)), fail=[failing])


def time_report(execution_id: str, uri: str, folder: Path) -> dict[str, float]:
    """`automl-eval report`'s work on one execution, timed: read its job runs from the store, build
    every table and figure into `folder`, log them back to the execution's run."""
    from tasks.report.build import build_report
    from tasks.tracking import read

    started, cpu_started = time.perf_counter(), time.process_time()
    runs = read.job_runs(execution_id=execution_id, uri=uri)
    read_s = time.perf_counter() - started
    report = build_report(runs, folder, title="bench")
    build_s = time.perf_counter() - started - read_s
    read.log_folder(execution_id, report.folder, uri=uri)
    return {
        "runs": float(len(runs)),
        "read_runs_s": read_s,
        "build_report_s": build_s,
        "report_total_s": time.perf_counter() - started,
        "report_cpu_s": time.process_time() - cpu_started,
    }


if __name__ == "__main__":
    main()
